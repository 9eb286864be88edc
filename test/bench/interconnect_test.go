//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// TestInterconnectBench: three clusters of two nodes (IPv4), a testbox pod on each cluster's
// node 2 (c1 also one on node 1). It prints:
//   - InterConnect created -> first cross-cluster packet: c2 joining c1 (c1's pod probing c2's
//     every 10 ms), then c3 joining both (c3's pod probing c1's);
//   - new Subnet in c1 -> route usable from c2 and c3: their pods probe the new subnet's
//     gateway address (c1's router answers it) every 10 ms from before the Subnet exists;
//   - iperf3 TCP throughput (4 streams, 10 s) c1-n2 -> c2-n2 across the clusters against
//     c1-n2 -> c1-n1 inside c1, in the same run, with both clusters active/standby and then
//     ECMP over both nodes (goal: cross/same >= 0.9 in ECMP).
//
// Times are pingstream's first-reply wall clock minus the create call's return (the pods share
// the host's clock), so they hold the probe interval (10 ms) as their resolution.
func TestInterconnectBench(t *testing.T) {
	r := upRig(t, rig.Config{Clusters: 3, Nodes: 2})
	cs := make([]*benchCluster, 3)
	for i := range cs {
		cs[i] = &benchCluster{t: t, cfg: r.State.Config, kubeconfig: r.State.Clusters[i].Kubeconfig, name: rig.ClusterName(i + 1)}
		cs[i].pod("p", rig.NodeName(i+1, 2))
	}
	cs[0].pod("q", rig.NodeName(1, 1))
	ip := make([]string, 3)
	for i, c := range cs {
		ip[i] = c.podIP("p")
	}
	q := cs[0].podIP("q")

	cs[0].interconnect("az1", "ActiveStandby", "c1-n1")
	cs[0].waitReady()
	fmt.Println("\n== interconnect, 3 clusters x 2 nodes, IPv4")
	d := firstPacket(t, cs[0], "p", ip[1], func() { cs[1].interconnect("az2", "ActiveStandby", "c2-n1") })
	fmt.Printf("c2's InterConnect created -> first packet c1 -> c2: %s\n", d)
	d = firstPacket(t, cs[2], "p", ip[0], func() { cs[2].interconnect("az3", "ActiveStandby", "c3-n1") })
	fmt.Printf("c3's InterConnect created -> first packet c3 -> c1: %s\n", d)

	for k, c := range cs {
		c.waitReady()
		for j := range cs {
			if j != k {
				firstPacket(t, c, "p", ip[j], func() {}) // every pair answers before the next step
			}
		}
	}
	gw := "10.40.1.1" // the new subnet's gateway, an address of c1's router
	ds := firstPackets(t, []*benchCluster{cs[1], cs[2]}, "p", gw, func() {
		cs[0].kubectl("", "create", "namespace", "fresh")
		cs[0].kubectl("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: fresh}\nspec: {cidrBlock: 10.40.1.0/24, namespaces: [fresh]}\n", "apply", "-f", "-")
	})
	fmt.Printf("new Subnet in c1 -> its gateway %s answers c2: %s, c3: %s\n", gw, ds[0], ds[1])

	same := iperf(t, cs[0], "p", cs[0], "q", q)
	cross := iperf(t, cs[0], "p", cs[1], "p", ip[1])
	fmt.Printf("iperf3 TCP, 4 streams, 10 s: c1-n2 -> c1-n1 %.2f Gbit/s; c1-n2 -> c2-n2 (active/standby) %.2f Gbit/s; ratio %.2f\n",
		same/1e9, cross/1e9, cross/same)
	for i, c := range cs[:2] {
		c.interconnect(fmt.Sprintf("az%d", i+1), "ECMP", rig.NodeName(i+1, 1), rig.NodeName(i+1, 2))
	}
	for _, c := range cs[:2] {
		c.waitActive(2)
	}
	firstPacket(t, cs[0], "p", ip[1], func() {})
	same = iperf(t, cs[0], "p", cs[0], "q", q)
	cross = iperf(t, cs[0], "p", cs[1], "p", ip[1])
	fmt.Printf("iperf3 TCP, 4 streams, 10 s: c1-n2 -> c1-n1 %.2f Gbit/s; c1-n2 -> c2-n2 (ECMP over 2 gateways each) %.2f Gbit/s; ratio %.2f (goal >= 0.9)\n",
		same/1e9, cross/1e9, cross/same)
}

// benchCluster drives one rig cluster with the rig's kubectl.
type benchCluster struct {
	t          *testing.T
	cfg        rig.Config
	kubeconfig string
	name       string
}

func (c *benchCluster) kubectl(stdin string, args ...string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.cfg.K8sBinDir, "kubectl"), append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s: kubectl %v: %v\n%s", c.name, args, err, out)
	}
	return string(out)
}

func (c *benchCluster) pod(name, node string) {
	c.kubectl(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: %s, imagePullPolicy: Never, args: [serve]}]
`, name, node, rig.TestboxImage), "apply", "-f", "-")
}

func (c *benchCluster) podIP(name string) string {
	c.kubectl("", "wait", "--for=condition=Ready", "pod/"+name, "--timeout=180s")
	return strings.TrimSpace(c.kubectl("", "get", "pod", name, "-o", "jsonpath={.status.podIP}"))
}

func (c *benchCluster) interconnect(az, mode string, gateways ...string) {
	quote := func(eps []string) string { return `"` + strings.Join(eps, `", "`) + `"` }
	c.kubectl(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: InterConnect
metadata: {name: default}
spec: {azName: %s, mode: %s, icNorthbound: [%s], icSouthbound: [%s], gatewayNodes: [%s], insecurePlainTCP: %t}
`, az, mode, quote(c.cfg.ICNBEndpoints()), quote(c.cfg.ICSBEndpoints()), strings.Join(gateways, ", "), c.cfg.InsecurePlainTCP), "apply", "-f", "-")
}

func (c *benchCluster) waitReady() {
	c.kubectl("", "wait", "--for=condition=Ready", "interconnect/default", "--timeout=120s")
}

// waitActive waits until the InterConnect's status lists n active gateways.
func (c *benchCluster) waitActive(n int) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out := c.kubectl("", "get", "interconnect", "default", "-o", "jsonpath={.status.activeGateways}")
		var active []string
		_ = json.Unmarshal([]byte(out), &active)
		if len(active) == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: active gateways %s, want %d", c.name, out, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// firstPacket is firstPackets for one prober.
func firstPacket(t *testing.T, c *benchCluster, pod, ip string, event func()) time.Duration {
	return firstPackets(t, []*benchCluster{c}, pod, ip, event)[0]
}

// firstPackets starts a 10 ms probe stream (60 s at most) from pod of each cluster to ip, does
// event 1 s in (each stream stops at its first reply), and returns, per prober, the first reply's time after event returned.
func firstPackets(t *testing.T, cs []*benchCluster, pod, ip string, event func()) []time.Duration {
	t.Helper()
	outs := make([]chan string, len(cs))
	for i, c := range cs {
		outs[i] = make(chan string, 1)
		go func() {
			cmd := exec.Command(filepath.Join(c.cfg.K8sBinDir, "kubectl"), "--kubeconfig", c.kubeconfig, "exec", pod, "--",
				"/testbox", "pingstream", "-until-reply", "-c", "6000", "-i", "10ms", "-W", "1s", ip)
			out, _ := cmd.CombinedOutput()
			outs[i] <- string(out)
		}()
	}
	time.Sleep(time.Second)
	event()
	at := time.Now()
	ds := make([]time.Duration, len(cs))
	for i, c := range cs {
		out := <-outs[i]
		_, v, ok := strings.Cut(out, "first reply at ")
		ns, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]), 10, 64)
		if !ok || err != nil {
			t.Fatalf("%s/%s -> %s: no reply in 60 s\n%s", c.name, pod, ip, out)
		}
		ds[i] = time.Unix(0, ns).Sub(at).Round(10 * time.Millisecond)
		if ds[i] < 0 {
			t.Fatalf("%s/%s -> %s answered %s before the change: the path existed already\n%s", c.name, pod, ip, -ds[i], out)
		}
	}
	return ds
}

// iperf returns the TCP throughput (bits/s, received) of 4 streams for 10 s from pod from of
// cluster fc to pod to (address ip) of cluster tc. iperf3 runs from the host inside each pod's
// network namespace (nsenter -n on a process of the pod), so the pod image needs no iperf3;
// the server is started and stopped by its pid.
func iperf(t *testing.T, fc *benchCluster, from string, tc *benchCluster, to, ip string) float64 {
	t.Helper()
	srv := exec.Command("nsenter", "-t", strconv.Itoa(podPid(t, tc, to)), "-n", "iperf3", "-s", "-1", "-p", "5201")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	time.Sleep(500 * time.Millisecond)
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(podPid(t, fc, from)), "-n", "iperf3", "-c", ip, "-p", "5201",
		"-P", "4", "-t", "10", "-J").Output()
	if err != nil {
		t.Fatalf("iperf3 %s/%s -> %s: %v\n%s", fc.name, from, ip, err, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.End.SumReceived.BitsPerSecond == 0 {
		t.Fatalf("iperf3 %s/%s -> %s: %v\n%s", fc.name, from, ip, err, out)
	}
	return res.End.SumReceived.BitsPerSecond
}

// podPid is the host pid of a process of pod name: the one whose cgroup path names the pod's
// UID (kubelet's cgroupfs driver: "pod<uid>"; systemd's: the UID with underscores).
func podPid(t *testing.T, c *benchCluster, name string) int {
	t.Helper()
	uid := strings.TrimSpace(c.kubectl("", "get", "pod", name, "-o", "jsonpath={.metadata.uid}"))
	keys := []string{"pod" + uid, "pod" + strings.ReplaceAll(uid, "-", "_")}
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, k := range keys {
			if strings.Contains(string(b), k) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				// skip the pause container: any process of the pod shares its netns
				return pid
			}
		}
	}
	t.Fatalf("%s: no process of pod %s (uid %s)", c.name, name, uid)
	return 0
}
