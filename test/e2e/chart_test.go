package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/hostnet"
	"github.com/kovn/kovn/test/rig"
)

// chartLab configures TestPodNetwork's dual-stack chart lab for chartSuite as well, so the
// chart's own checks share its lab (a lab of their own cost CI 41 s to bring up and 30 s of
// pod checks the suite already makes).
func chartLab(cfg *rig.Config) {
	// With kovn-pinger, whose pods on kovn's own network helm uninstall must remove first.
	cfg.Pinger = true
	cfg.ChartICDatabases = true // and serves a clusterset's IC databases
	// CA rotation steps short enough for a test (the kubelets sync pods every 5 s for it).
	cfg.ChartCARotationStep = 15 * time.Second
}

// chartComponents are the chart's workloads and their pod counts in a lab of nodes nodes.
func chartComponents(nodes int) map[string]int {
	return map[string]int{"kovn-ovn-central": 1, "kovn-ovs": nodes, "kovn-daemon": nodes, "kovn-controller": 2, "kovn-pinger": nodes}
}

// chartPodsOnly: with --install chart, OVN central, OVS, ovn-controller, kovn-controller and
// kovn-daemon run as the chart's pods on the rig's kubelets, from the image `make images`
// built, never as rig processes.
func chartPodsOnly(t *testing.T, c *cluster, r *rig.Rig) {
	t.Run("every component is a Ready pod of the chart, none a rig process", func(t *testing.T) {
		c.t = t
		checkChartPods(t, c, chartComponents(r.State.Config.Nodes))
		for _, p := range r.State.AllProcs() {
			for _, name := range []string{"ovs-vswitchd", "ovsdb-server", "ovn-controller", "ovn-northd", "kovn-daemon", "kovn-controller"} {
				if p.Name == name {
					t.Errorf("the rig runs %s itself (pid %d): with --install chart it must be a pod", name, p.Pid)
				}
			}
		}
	})
}

// chartSuite: what only kovn installed by `helm install` of deploy/ has (chartLab): mutual TLS
// from the chart's PKI and its CA rotation, the clusterset's IC databases, metrics over TLS,
// kubectl kovn against the chart's pods, attachment networks with the image's delegates; then
// helm uninstall leaves nothing on the nodes and a second install works. Pods a (c1-n1) and b
// (c1-n2) run on ovn-default. It runs last on its lab: it uninstalls kovn.
func chartSuite(t *testing.T, c *cluster, r *rig.Rig, a, b *corev1.Pod) {
	cfg := r.State.Config
	t.Run("mutual TLS: OVN central refuses plain and foreign clients; each node's chassis certificate from a CSR opens SB only, for its own chassis", func(t *testing.T) {
		chartIdentity(t, c, cfg)
	})
	t.Run("both OVN CAs rotated in three steps under a 100 ms pod-to-pod stream: none lost, every client on the new CAs, the old refused", func(t *testing.T) {
		chartCARotation(t, c, cfg, b)
	})
	t.Run("the clusterset's IC databases from the chart: mutual TLS only, OVN_ClusterSet beside IC-SB, raft on ssl", func(t *testing.T) {
		chartICDatabases(t, cfg)
	})
	t.Run("metrics: over TLS, to tokens allowed to get /metrics only", func(t *testing.T) {
		c.t = t
		cl, n := nodeIndex(t, leadingControllerPod(t, c).Spec.NodeName)
		metricsNeedToken(t, c, cfg.NodeNS(cl, n), chartControllerMetricsPort)
	})

	var echoVIPs []string
	t.Run("ClusterIP: TCP reaches both backends, both families", func(t *testing.T) {
		c.t = t
		c.createNamespace("svc")
		c.createPod(backendPod("be1", "c1-n1", map[string]string{"app": "echo"}))
		c.createPod(backendPod("be2", "c1-n2", map[string]string{"app": "echo"}))
		c.createPod(testboxPod("svc", "client", onNode("c1-n1")))
		for _, p := range []string{"be1", "be2", "client"} {
			c.waitReady("svc", p, 90*time.Second)
		}
		echoVIPs = c.createService(serviceSpec("echo", map[string]string{"app": "echo"}))
		for _, vip := range echoVIPs {
			c.waitBackends("svc", "client", vip, []string{"be1", "be2"}, 30*time.Second)
		}
	})
	kubectlKovnOps(t, c, a, b, echoVIPs)
	t.Run("attachment networks: kovn net1 and macvlan net2 (the delegate from kovn's image), deleted cleanly", func(t *testing.T) {
		l := &attachLab{cfg: cfg, c: c}
		l.setUp(t)
		l.threeInterfaces(t)
		l.deleted(t)
	})

	t.Run("helm uninstall: no kovn state left on any node, every node reachable", func(t *testing.T) {
		c.t = t
		// Pods on kovn's network go first: once kovn is gone nothing can tear their network down.
		deleteKovnPods(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		start := time.Now()
		if err := r.UninstallChart(ctx, 1); err != nil {
			t.Fatal(err)
		}
		t.Logf("helm uninstall (its cleanup hook on %d nodes included) took %.1fs", cfg.Nodes, time.Since(start).Seconds())
		// helm's --wait ends when the chart's objects are deleted; their pods' processes may
		// still be stopping (CI once found ovs-vswitchd and ovsdb-server there right after).
		for n := 1; n <= cfg.Nodes; n++ {
			var left []string
			if err := eventually(30*time.Second, func() error {
				if left = kovnStateOn(t, cfg, 1, n); len(left) > 0 {
					return fmt.Errorf("%d left", len(left))
				}
				return nil
			}); err != nil {
				t.Errorf("%s 30 s after helm uninstall:\n  %s", rig.NodeName(1, n), strings.Join(left, "\n  "))
			}
		}
		t.Logf("no kovn state left on the nodes %.1fs after helm uninstall began", time.Since(start).Seconds())
		if _, err := os.Stat(filepath.Join(cfg.Dir, "cni-bin", "kovn-cni")); err == nil {
			t.Error("kovn-cni is still in the CNI bin dir")
		}
		// The node's address is back on eth0 (the rig's uplink keeper, as the node's own
		// network configuration): the control plane still reaches every node.
		for n := 1; n <= cfg.Nodes; n++ {
			ip := cfg.NodeIPs(1, n)[0].String()
			err := eventually(20*time.Second, func() error {
				out, err := exec.Command("ip", "netns", "exec", cfg.ControlPlaneNS(1), "ping", "-c", "1", "-W", "1", ip).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s (%s) unreachable after helm uninstall: %v", rig.NodeName(1, n), ip, err)
			}
		}
	})

	t.Run("re-install: kovn runs again and new pods get networking", func(t *testing.T) {
		c.t = t
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		start := time.Now()
		if err := r.InstallChart(ctx, 1); err != nil {
			t.Fatal(err)
		}
		t.Logf("helm install again: %.1fs", time.Since(start).Seconds())
		checkChartPods(t, c, chartComponents(cfg.Nodes))
		c.createPod(testboxPod("default", "c", onNode("c1-n1")))
		c.createPod(testboxPod("default", "d", onNode("c1-n2")))
		pc := c.waitRunning("default", "c", 90*time.Second)
		pd := c.waitRunning("default", "d", 90*time.Second)
		for _, v6 := range []bool{false, true} {
			c.pingNewPeer("default", "c", podIP(t, pd, v6))
			c.ping("default", "d", podIP(t, pc, v6))
		}
	})
}

// deleteKovnPods deletes every pod on kovn's network outside kube-system (the chart's own
// go with it) and waits until they are gone: a pod is removed from the API only once its
// kubelet stopped its sandbox, so kovn-cni's DEL has run for each.
func deleteKovnPods(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	pods, err := c.kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	var left []string
	for _, p := range pods.Items {
		if p.Namespace == "kube-system" || p.Spec.HostNetwork {
			continue
		}
		if len(p.OwnerReferences) > 0 {
			t.Fatalf("pod %s/%s has a controller (%s %s) that would bring it back: delete that first", p.Namespace, p.Name,
				p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name)
		}
		if err := c.kc.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &one}); err != nil {
			t.Fatal(err)
		}
		left = append(left, p.Namespace+"/"+p.Name)
	}
	if err := eventually(90*time.Second, func() error {
		var still []string
		for _, n := range left {
			ns, name, _ := strings.Cut(n, "/")
			if _, err := c.kc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				still = append(still, n)
			}
		}
		if len(still) > 0 {
			return fmt.Errorf("pods %v still there", still)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted the %d pods on kovn's network", len(left))
}

// ipsetsIn are the names of the ipsets starting with prefix in the named netns. It runs on a
// thread of its own that never leaves the goroutine locked to it, so the thread ends with the
// goroutine and nothing else ever runs in that netns.
func ipsetsIn(nsName, prefix string) ([]string, error) {
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // no unlock: the thread goes when the goroutine returns
		ns, err := netns.GetFromName(nsName)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			done <- result{err: err}
			return
		}
		names, err := hostnet.AddrSetNames(prefix)
		done <- result{names, err}
	}()
	r := <-done
	return r.names, r.err
}

// kovnStateOn lists what of kovn is left on node (cl, n): processes, CNI config, links,
// iptables chains, ipsets, routes, OVS bridges and external_ids, run and OVN central files.
func kovnStateOn(t *testing.T, cfg rig.Config, cl, n int) []string {
	t.Helper()
	var left []string
	pids, _ := exec.Command("ip", "netns", "pids", cfg.NodeNS(cl, n)).Output()
	for _, pid := range strings.Fields(string(pids)) {
		comm, _ := os.ReadFile("/proc/" + pid + "/comm")
		name := strings.TrimSpace(string(comm))
		if slices.Contains([]string{"ovs-vswitchd", "ovsdb-server", "ovn-controller", "ovn-northd", "kovn-daemon", "kovn-controller"}, name) {
			left = append(left, "process "+name+" (pid "+pid+")")
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.NodeDir(cl, n), "cni-netd", "00-kovn.conflist")); err == nil {
		left = append(left, "CNI config 00-kovn.conflist")
	}
	links, _ := nodeCmd(cfg, cl, n, "ip", "-o", "link", "show")
	for _, l := range strings.Split(links, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			name := strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
			if name == "ovn0" || name == "mirror0" || name == "br-int" || strings.HasSuffix(name, "_h") || strings.HasPrefix(name, "br-phys") {
				left = append(left, "link "+name)
			}
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := nodeCmd(cfg, cl, n, save)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "KOVN") {
				left = append(left, save+": "+l)
			}
		}
	}
	if sets, err := ipsetsIn(cfg.NodeNS(cl, n), "KOVN-"); err != nil || len(sets) > 0 {
		left = append(left, fmt.Sprintf("ipsets %v %v", sets, err))
	}
	for _, fam := range []string{"-4", "-6"} {
		if out, _ := nodeCmd(cfg, cl, n, "ip", fam, "route", "show", "proto", "75"); out != "" {
			left = append(left, "kovn's routes ("+fam+"): "+out)
		}
		out, _ := nodeCmd(cfg, cl, n, "ip", fam, "route", "show")
		for _, p := range append(cfg.PodCIDRs(cl), cfg.ServiceCIDRs(cl)...) {
			if strings.Contains(out, p.String()) {
				left = append(left, "route to "+p.String())
			}
		}
	}
	db := filepath.Join(cfg.NodeDir(cl, n), "host", "ovs-db", "conf.db")
	out, err := exec.Command("ovsdb-tool", "query", db, `["Open_vSwitch",{"op":"select","table":"Bridge","where":[],"columns":["name"]}]`).CombinedOutput()
	if err != nil {
		left = append(left, fmt.Sprintf("conf.db unreadable: %v %s", err, out))
	} else if got := string(out); strings.Contains(got, `"br-int"`) || strings.Contains(got, `"br-phys"`) {
		left = append(left, "OVS bridges: "+got)
	}
	for _, dir := range []string{"kovn-run", "ovn-central"} {
		entries, _ := os.ReadDir(filepath.Join(cfg.NodeDir(cl, n), "host", dir))
		for _, e := range entries {
			left = append(left, dir+"/"+e.Name())
		}
	}
	return left
}

// checkChartPods waits until the chart's workloads have want pods each, all Running and Ready.
func checkChartPods(t *testing.T, c *cluster, want map[string]int) {
	t.Helper()
	var last string
	err := eventually(2*time.Minute, func() error {
		pods, err := c.kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]int{}
		var notReady []string
		for i := range pods.Items {
			p := &pods.Items[i]
			app := p.Labels["app"]
			if _, ok := want[app]; !ok {
				continue
			}
			got[app]++
			if p.Status.Phase != corev1.PodRunning || !podReady(p) {
				notReady = append(notReady, p.Name+"("+string(p.Status.Phase)+")")
			}
		}
		last = fmt.Sprintf("pods per workload %v, not ready %v", got, notReady)
		for app, n := range want {
			if got[app] != n {
				return fmt.Errorf("%s", last)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("%s", last)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("chart pods: %v", err)
	}
	t.Logf("chart pods: %s", last)
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// nodeCmd runs a command in node (cl, n)'s network namespace.
func nodeCmd(cfg rig.Config, cl, n int, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", cfg.NodeNS(cl, n)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
