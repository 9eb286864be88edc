package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/kovnctl"
	"github.com/kovn/kovn/pkg/node/mirror"
	"github.com/kovn/kovn/test/rig"
)

// TestObserve: seeing the data plane on kovn installed from the chart (kubectl kovn reads the
// chart's pods): kovn-pinger's path checks, ACL logs, traffic mirroring, OVN central's health.
func TestObserve(t *testing.T) {
	cfg := rigConfig(t, 1, 3)
	cfg.Kovn, cfg.IPFamily, cfg.Install, cfg.Pinger = true, rig.Dual, rig.InstallChart, true
	cfg.MirrorNamespaces = []string{"mir"} // mirroring's namespace, allowed by the admin
	cfg.CentralNodes = 3                   // NB and SB as 3-member raft clusters
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	t.Run("network quality: geneve blocked between two nodes shows as loss on exactly their paths", func(t *testing.T) {
		c.t = t
		networkQuality(t, c)
	})
	t.Run("ACL logging of a namespace's policies and of a Subnet rule", func(t *testing.T) {
		c.t = t
		aclLogging(t, c)
	})
	t.Run("traffic mirroring of one pod to its node's mirror0 and to a GRE collector", func(t *testing.T) {
		c.t = t
		mirroring(t, c)
	})
	// Last: the central members' leadership moves.
	t.Run("OVN central health: a stopped NB raft member shows in the monitor's metrics", func(t *testing.T) {
		c.t = t
		centralHealth(t, c)
	})
}

// kubectlKovn runs kubectl kovn against c with kovn's binaries first on PATH.
func (c *cluster) kubectlKovn(args ...string) (string, string, error) {
	cfg := c.st.Config
	cmd := exec.Command(filepath.Join(cfg.K8sBinDir, "kubectl"), append([]string{"kovn"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+cfg.KovnBinDir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.info.Kubeconfig)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), err
}

// aclLogEntries is what kubectl kovn acl-log -n ns -o json prints.
func (c *cluster) aclLogEntries(ns string) []kovnctl.ACLLogEntry {
	c.t.Helper()
	out, errOut, err := c.kubectlKovn("acl-log", "-n", ns, "-o", "json")
	if err != nil {
		c.t.Fatalf("kubectl kovn acl-log: %v %s", err, errOut)
	}
	var entries []kovnctl.ACLLogEntry
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var le kovnctl.ACLLogEntry
		if err := dec.Decode(&le); err != nil {
			c.t.Fatalf("acl-log output: %v\n%s", err, out)
		}
		entries = append(entries, le)
	}
	return entries
}

// aclLogFairness: each namespace's policies log through a meter of their own, so acl's flood
// (20,000 denied datagrams as fast as a's socket sends them) leaves namespace acl2's lines
// intact: acl2's 10 denied datagrams, sent to a pod of the same node during the flood, are
// logged all 10 (through one shared meter, the flood would take nearly every token).
func aclLogFairness(t *testing.T, c *cluster, floodTarget string) {
	t.Log("a flood in acl leaves acl2's log lines intact: a meter per namespace")
	c.createNamespace("acl2")
	c.createPod(testboxPod("acl2", "a", onNode("c1-n1")))
	c.createPod(testboxPod("acl2", "b", onNode("c1-n2"))) // the flood's target's node: the same meter's node
	c.waitRunning("acl2", "a", 90*time.Second)
	b2 := podIP(t, c.waitRunning("acl2", "b", 90*time.Second), false)
	c.applyYAML(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: guard, namespace: acl2}
spec: {podSelector: {}, policyTypes: [Ingress]}
`)
	c.annotateNamespace("acl2", annotation.ACLLogging, `{"deny": "alert"}`)
	c.waitACLLog("acl2/guard:ingress/deny", "alert")
	before := c.aclLogCounts("acl2", 0)
	flooded := make(chan time.Duration)
	go func() {
		start := time.Now()
		c.exec("acl", "a", "udp", "-n", "20000", "-i", "0", "-W", "0", net.JoinHostPort(floodTarget, "9001"), "flood")
		flooded <- time.Since(start)
	}()
	start := time.Now()
	c.exec("acl2", "a", "udp", "-n", "10", "-i", "100ms", "-W", "0", net.JoinHostPort(b2, "9001"), "fair")
	sent := time.Since(start)
	took := <-flooded
	key := "NetworkPolicy acl2/guard ingress/deny drop alert udp acl2/a->acl2/b"
	got := diffCounts(before, c.aclLogCounts("acl2", len(before)+10))[key]
	t.Logf("acl's flood of 20000 datagrams took %.1fs; acl2's 10 datagrams, sent within %.1fs of its start, logged %d times", took.Seconds(), sent.Seconds(), got)
	if sent > took {
		t.Logf("acl2's datagrams outlasted the flood (%.1fs > %.1fs): the check is weaker", sent.Seconds(), took.Seconds())
	}
	if got != 10 {
		t.Errorf("acl2's 10 denied datagrams during acl's flood logged %d times, want 10", got)
	}
}

// aclLogKey says what a line is about, to count lines by kind.
func aclLogKey(le kovnctl.ACLLogEntry) string {
	return fmt.Sprintf("%s %s/%s %s %s %s %s %s->%s", le.Kind, le.Namespace, le.Name, le.Rule, le.Verdict, le.Severity, le.Protocol,
		le.Source.Pod, le.Dest.Pod)
}

// aclLogCounts counts acl-log lines by aclLogKey once the count has not changed for 3 s (a
// line reaches the container log within a second of its packet).
func (c *cluster) aclLogCounts(ns string, atLeast int) map[string]int {
	c.t.Helper()
	var last map[string]int
	lastTotal, stable := -1, time.Time{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		counts := map[string]int{}
		total := 0
		for _, le := range c.aclLogEntries(ns) {
			counts[aclLogKey(le)]++
			total++
		}
		if total != lastTotal {
			lastTotal, stable, last = total, time.Now(), counts
		} else if total >= atLeast && time.Since(stable) >= 3*time.Second {
			return counts
		}
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

// diffCounts is after minus before, without zero entries.
func diffCounts(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range after {
		if d := n - before[k]; d != 0 {
			out[k] = d
		}
	}
	for k, n := range before {
		if _, ok := after[k]; !ok {
			out[k] = -n
		}
	}
	return out
}

// waitACLLog waits until the NB ACL named name logs (log=true) at severity, or not at all
// (severity "").
func (c *cluster) waitACLLog(name, severity string) {
	c.t.Helper()
	err := eventually(30*time.Second, func() error {
		out := strings.TrimSpace(c.nbctl("--bare", "--columns=log,severity,meter", "find", "ACL", fmt.Sprintf("name=%q", name)))
		want := "false\n\n"
		if severity != "" {
			// A policy's ACL ("ns/policy:rule") logs through its namespace's meter, a Subnet's
			// ("subnet:acl/i") through the admin's.
			meter := topology.ACLLogMeter
			if owner, _, _ := strings.Cut(name, ":"); strings.Contains(owner, "/") {
				meter = topology.NamespaceLogMeter(strings.SplitN(owner, "/", 2)[0])
			}
			want = "true\n" + severity + "\n" + meter
		}
		if out != strings.TrimSpace(want) {
			return fmt.Errorf("ACL %s: log, severity, meter = %q, want %q", name, out, want)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) annotateNamespace(ns, key, value string) {
	c.t.Helper()
	c.kubectlOK("annotate", "--overwrite", "namespace", ns, key+"="+value)
}

// aclLogging: a deny policy with logging on logs exactly the denied probes (both families),
// allowed connections only once allow-logging is on (one line each), a 10,000-datagram flood
// no more lines than the meter lets through, a bad annotation is an event and keeps what is
// logged; a Subnet ACL with log: true logs exactly its drops.
func aclLogging(t *testing.T, c *cluster) {
	c.createNamespace("acl")
	c.createPod(testboxPod("acl", "a", onNode("c1-n1")))
	friend := testboxPod("acl", "friend", onNode("c1-n1"))
	friend.Labels["role"] = "friend"
	c.createPod(friend)
	c.createPod(testboxPod("acl", "b", onNode("c1-n2")))
	var b *corev1.Pod
	for _, n := range []string{"a", "friend", "b"} {
		p := c.waitRunning("acl", n, 90*time.Second)
		if n == "b" {
			b = p
		}
	}
	c.applyYAML(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: guard, namespace: acl}
spec:
  podSelector: {matchLabels: {app: b}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {role: friend}}}]
    ports: [{protocol: TCP, port: 9000}]
`)
	b4, b6 := podIP(t, b, false), podIP(t, b, true)
	denyKey := func(proto string) string {
		return fmt.Sprintf("NetworkPolicy acl/guard ingress/deny drop alert %s acl/a->acl/b", proto)
	}
	const allowKey = "NetworkPolicy acl/guard ingress/0/ip4 allow notice tcp acl/friend->acl/b"
	probe := func(count int) {
		c.t.Helper()
		for _, ip := range []string{b4, b6} {
			if out, err := c.exec("acl", "a", "ping", "-c", fmt.Sprint(count), "-W", "100ms", ip); err == nil {
				c.t.Fatalf("a's pings to b (%s) answered despite the policy:\n%s", ip, out)
			}
		}
	}
	connect := func(count int) {
		c.t.Helper()
		for i := 0; i < count; i++ {
			if out, err := c.exec("acl", "friend", "connect", net.JoinHostPort(b4, "9000")); err != nil {
				c.t.Fatalf("friend -> b:9000 refused: %v %s", err, out)
			}
		}
	}
	c.waitACLLog("acl/guard:ingress/deny", "")
	probe(3)
	connect(2)
	if got := c.aclLogCounts("acl", 0); len(got) != 0 {
		t.Fatalf("logging off: acl-log shows %v", got)
	}

	t.Log("deny logging on: exactly the denied echoes, no allowed connection")
	c.annotateNamespace("acl", annotation.ACLLogging, `{"deny": "alert"}`)
	c.waitACLLog("acl/guard:ingress/deny", "alert")
	c.waitACLLog("acl/guard:ingress/0/ip4", "")
	probe(5)
	connect(3)
	got := c.aclLogCounts("acl", 10)
	want := map[string]int{denyKey("icmp"): 5, denyKey("icmp6"): 5}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("acl-log after 5 denied echoes per family and 3 allowed connections (allow logging off):\n got %v\nwant %v", got, want)
	}
	out, _, _ := c.kubectlKovn("acl-log", "-n", "acl")
	t.Logf("kubectl kovn acl-log -n acl:\n%s", out)

	t.Log("allow logging on too: the allowed connections' packets")
	c.annotateNamespace("acl", annotation.ACLLogging, `{"deny": "alert", "allow": "notice"}`)
	c.waitACLLog("acl/guard:ingress/0/ip4", "notice")
	connect(3)
	c.aclLogCounts("acl", 13)
	// OVN evaluates ACLs on every packet of a connection's original direction: each of the 3
	// connections logs its packets from friend (SYN first), none of b's replies.
	conns, syns, other := map[int]bool{}, 0, 0
	for _, le := range c.aclLogEntries("acl") {
		switch {
		case le.Verdict != "allow":
		case aclLogKey(le) == allowKey && le.Dest.Port == 9000:
			conns[le.Source.Port] = true
			if le.TCPFlags == "syn" {
				syns++
			}
		default:
			other++
			t.Errorf("allow line not of friend's connections to b:9000: %+v", le)
		}
	}
	t.Logf("3 allowed connections: %d connections and %d SYNs logged, %d other allow lines", len(conns), syns, other)
	if len(conns) != 3 || syns != 3 {
		t.Errorf("3 allowed connections logged as %d connections with %d SYNs, want 3 and 3", len(conns), syns)
	}

	t.Log("a flood of 10,000 denied datagrams: no more lines than the meter allows")
	before := c.aclLogCounts("acl", 0)
	start := time.Now()
	c.exec("acl", "a", "udp", "-n", "10000", "-i", "0", "-W", "0", net.JoinHostPort(b4, "9001"), "flood") // every one unanswered
	took := time.Since(start)
	flood := diffCounts(before, c.aclLogCounts("acl", 0))[denyKey("udp")]
	limit := 20*int(math.Ceil(took.Seconds())) + 20 // the meter's rate over the flood, and its burst
	t.Logf("flood: 10000 datagrams in %.1fs, %d lines logged (meter limit %d)", took.Seconds(), flood, limit)
	if flood < 1 || flood > limit {
		t.Errorf("flood logged %d lines, want 1..%d", flood, limit)
	}

	aclLogFairness(t, c, b4)

	t.Log("a bad annotation: an event, and the ACLs keep logging as they did")
	c.annotateNamespace("acl", annotation.ACLLogging, `{"deny": "loud"}`)
	err := eventually(30*time.Second, func() error {
		out, err := c.kubectl("get", "events", "-A", "--field-selector", "involvedObject.kind=Namespace,involvedObject.name=acl,reason=InvalidACLLogging", "-o", "name")
		if err != nil || strings.TrimSpace(out) == "" {
			return fmt.Errorf("no InvalidACLLogging event on namespace acl: %v %s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	c.waitACLLog("acl/guard:ingress/deny", "alert")
	c.waitACLLog("acl/guard:ingress/0/ip4", "notice")

	t.Log("logging off: nothing more is logged")
	c.annotateNamespace("acl", annotation.ACLLogging, "")
	c.waitACLLog("acl/guard:ingress/deny", "")
	before = c.aclLogCounts("acl", 0)
	probe(2)
	connect(2)
	if d := diffCounts(before, c.aclLogCounts("acl", 0)); len(d) != 0 {
		t.Errorf("logging off, yet acl-log shows %v more", d)
	}

	t.Run("a Subnet ACL with log: true", func(t *testing.T) {
		c.t = t
		c.createNamespace("aclsub")
		c.applyYAML(`apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: aclsub}
spec:
  cidrBlock: 10.213.0.0/24
  namespaces: [aclsub]
  acls:
  - {direction: to-lport, priority: 10, match: "udp.dst == 9001", action: drop, log: true, severity: warning}
`)
		c.waitSubnetReady("aclsub")
		c.createPod(testboxPod("aclsub", "x", onNode("c1-n1")))
		c.createPod(testboxPod("aclsub", "y", onNode("c1-n2")))
		c.waitRunning("aclsub", "x", 90*time.Second)
		y := c.waitRunning("aclsub", "y", 90*time.Second)
		c.waitACLLog("aclsub:acl/0", "warning")
		c.exec("aclsub", "x", "udp", "-n", "4", "-i", "100ms", "-W", "100ms", net.JoinHostPort(podIP(t, y, false), "9001"), "hi")
		if out, err := c.exec("aclsub", "x", "connect", net.JoinHostPort(podIP(t, y, false), "9000")); err != nil {
			t.Errorf("x -> y:9000 (no rule) refused: %v %s", err, out)
		}
		want := map[string]int{"Subnet /aclsub acl/0 drop warning udp aclsub/x->aclsub/y": 4}
		if got := c.aclLogCounts("aclsub", 4); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Subnet ACL log: got %v, want %v", got, want)
		}
	})
}

// vsctl runs ovs-vsctl on node n's Open_vSwitch database (a diagnostic CLI in tests).
func (c *cluster) vsctl(n int, args ...string) string {
	c.t.Helper()
	cfg := c.st.Config
	out, err := exec.Command("ovs-vsctl", append([]string{"--db=unix:" + cfg.OVSDBSocket(1, n), "--timeout=10"}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ovs-vsctl %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// mirroredPorts is the names of the ports node n's Mirror named name selects, as
// "src ports | dst ports | output port" ("" when there is no such Mirror).
func (c *cluster) mirroredPorts(n int, name string) string {
	c.t.Helper()
	rows := strings.Split(c.vsctl(n, "--bare", "--columns=select_src_port,select_dst_port,output_port", "find", "Mirror", "name="+name), "\n")
	if len(rows) != 3 {
		return ""
	}
	portName := map[string]string{}
	ports := strings.Fields(c.vsctl(n, "--bare", "--columns=_uuid,name", "list", "Port"))
	for i := 0; i+1 < len(ports); i += 2 {
		portName[ports[i]] = ports[i+1]
	}
	var cols []string
	for _, r := range rows {
		var names []string
		for _, u := range strings.Fields(r) {
			names = append(names, portName[u])
		}
		sort.Strings(names)
		cols = append(cols, strings.Join(names, ","))
	}
	return strings.Join(cols, " | ")
}

// echoLines counts the ICMP and ICMPv6 echo requests and replies between a and b in tcpdump
// output (either way round).
func echoLines(out string, a, b []string) (requests, replies int) {
	for _, l := range strings.Split(out, "\n") {
		for _, x := range a {
			for _, y := range b {
				if !strings.Contains(l, x+" > "+y+":") && !strings.Contains(l, y+" > "+x+":") {
					continue
				}
				switch {
				case strings.Contains(l, "echo request"):
					requests++
				case strings.Contains(l, "echo reply"):
					replies++
				}
			}
		}
	}
	return requests, replies
}

// mirroring: pod m annotated ovn.kovn.io/mirror=true on c1-n1 has its echoes to p (c1-n2),
// both directions and families, copied to c1-n1's mirror0, exactly, and none of u, its
// unannotated neighbour; no echo is lost. The annotation removed, no Mirror row is left. With
// a GRE collector (the external host) the same echoes arrive there, encapsulated, and so with
// an ERSPAN one.
func mirroring(t *testing.T, c *cluster) {
	cfg := c.st.Config
	c.createNamespace("mir")
	c.createPod(testboxPod("mir", "m", onNode("c1-n1"), withAnnotations(mirror.Annotation, "true")))
	c.createPod(testboxPod("mir", "u", onNode("c1-n1")))
	c.createPod(testboxPod("mir", "p", onNode("c1-n2")))
	m := c.waitRunning("mir", "m", 90*time.Second)
	u := c.waitRunning("mir", "u", 90*time.Second)
	p := c.waitRunning("mir", "p", 90*time.Second)
	mIf := c.vsctl(1, "--bare", "--columns=name", "find", "Interface", "external_ids:iface-id=m.mir")
	want := mIf + " | " + mIf + " | " + mirror.Port
	if err := eventually(30*time.Second, func() error {
		if got := c.mirroredPorts(1, "kovn-mirror0"); got != want {
			return fmt.Errorf("c1-n1's Mirror kovn-mirror0: %q, want %q", got, want)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if got := c.vsctl(2, "--bare", "--columns=name", "find", "Mirror"); got != "" {
		t.Errorf("c1-n2 has no mirrored pod, yet Mirror rows %q", got)
	}
	echoes := func() {
		for _, src := range []string{"m", "u"} {
			for _, ip := range podIPs(p) {
				c.pingNewPeer("mir", src, ip) // every echo answered: mirroring changes no forwarding
			}
		}
	}
	filter := "icmp or (icmp6 and (ip6[40] == 128 or ip6[40] == 129))"
	out := capture(t, cfg.NodeNS(1, 1), mirror.Port, filter, echoes)
	mReq, mRep := echoLines(out, podIPs(m), podIPs(p))
	uReq, uRep := echoLines(out, podIPs(u), podIPs(p))
	t.Logf("mirror0 on c1-n1: m's echoes %d requests, %d replies; u's %d, %d", mReq, mRep, uReq, uRep)
	if mReq != 2*pingCount || mRep != 2*pingCount || uReq != 0 || uRep != 0 {
		t.Errorf("mirror0 saw m's echoes %d/%d (want %d/%d) and u's %d/%d (want 0/0):\n%s", mReq, mRep, 2*pingCount, 2*pingCount, uReq, uRep, out)
	}

	t.Log("annotation removed: no Mirror row, mirror0 stays")
	c.kubectlOK("annotate", "-n", "mir", "pod", "m", mirror.Annotation+"-")
	if err := eventually(30*time.Second, func() error {
		if got := c.vsctl(1, "--bare", "--columns=name", "find", "Mirror"); got != "" {
			return fmt.Errorf("Mirror rows %q left", got)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if out := capture(t, cfg.NodeNS(1, 1), mirror.Port, filter, func() { c.ping("mir", "m", podIP(t, p, false)) }); strings.Contains(out, "echo") {
		t.Errorf("mirroring off, mirror0 still saw:\n%s", out)
	}

	t.Log("a GRE collector: the external host receives m's echoes, encapsulated")
	collector := rig.ExternalHostIP().String()
	c.kubectlOK("-n", "kube-system", "patch", "daemonset", "kovn-daemon", "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/command/-","value":"--mirror-remote=gre:`+collector+`:7"}]`)
	c.kubectlOK("-n", "kube-system", "rollout", "status", "daemonset/kovn-daemon", "--timeout=3m")
	c.kubectlOK("annotate", "-n", "mir", "pod", "m", mirror.Annotation+"=true")
	if err := eventually(60*time.Second, func() error {
		if got := c.mirroredPorts(1, "kovn-mirror-remote"); got != mIf+" | "+mIf+" | kovn-mirror-rem" {
			return fmt.Errorf("c1-n1's Mirror kovn-mirror-remote: %q", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The collector's address must be in OVS's tunnel neighbour cache before the first GRE
	// packet leaves (a userspace datapath drops it meanwhile): single echoes until one arrives.
	// A miss leaves a cached drop that traffic keeps alive: each retry waits past the datapath
	// flows' 10 s idle time.
	pIP := podIP(t, p, false)
	tries := 0
	if err := eventually(45*time.Second, func() error {
		if tries++; tries > 1 {
			time.Sleep(11 * time.Second)
		}
		out := capture(t, cfg.ExtNS(), "any", "proto gre", func() { _, _ = c.exec("mir", "m", "ping", "-c", "1", "-W", "1s", pIP) })
		if !strings.Contains(out, "echo request") {
			return fmt.Errorf("no GRE packet at the collector yet; c1-n1's tunnel neighbours:\n%s\nmirrors: %s\ncapture: %s",
				nodeAppctl(cfg, 1, "tnl/neigh/show"), c.vsctl(1, "--bare", "--columns=name,output_port,select_src_port", "list", "Mirror"), out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the first GRE packet reached the collector at try %d", tries)
	// Known flake, not explained: in some runs no reply reaches the collector (every request
	// does); a second run of echoes after the datapath flows' idle time is allowed, logged.
	var greOut string
	var gReq, gRep int
	for run := 1; run <= 2; run++ {
		greOut = capture(t, cfg.ExtNS(), "any", "proto gre", func() { c.ping("mir", "m", pIP) })
		if gReq, gRep = echoLines(greOut, []string{podIP(t, m, false)}, []string{podIP(t, p, false)}); gRep == pingCount || run == 2 {
			break
		}
		t.Logf("GRE collector, run 1: %d requests, %d replies of %d echoes; again after 11 s", gReq, gRep, pingCount)
		time.Sleep(11 * time.Second)
	}
	t.Logf("GRE collector %s: %d requests, %d replies of m's %d echoes", collector, gReq, gRep, pingCount)
	if gReq != pingCount || gRep != pingCount || !strings.Contains(greOut, "key=0x7") {
		t.Errorf("the collector saw %d requests and %d replies (want %d each, GRE key 7):\n%s", gReq, gRep, pingCount, greOut)
	}
	erspanCollector(t, c, podIP(t, m, false), pIP)
}

// erspanCollector: c1-n1's collector re-pointed at the external host over ERSPAN (type II,
// index 5), the host receives exactly m's echoes to p and their replies. The lab's tcpdump
// does not decode ERSPAN, so the filter reads the inner packet at its offsets in the outer IPv4
// packet: 20 (IP) + 8 (GRE with sequence number) + 8 (ERSPAN II) + 14 (Ethernet) = 50 to the
// inner IPv4 header, whose source is at 62, destination at 66 and ICMP type at 70; the
// ERSPAN index is the low 20 bits of the word at 32.
func erspanCollector(t *testing.T, c *cluster, mIP, pIP string) {
	cfg := c.st.Config
	arg := "--mirror-remote=erspan:" + rig.ExternalHostIP().String() + ":5"
	var command []string
	if err := json.Unmarshal([]byte(c.kubectlOK("-n", "kube-system", "get", "daemonset", "kovn-daemon", "-o",
		"jsonpath={.spec.template.spec.containers[0].command}")), &command); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(command, func(a string) bool { return strings.HasPrefix(a, "--mirror-remote=") })
	if i < 0 {
		t.Fatalf("kovn-daemon's command has no --mirror-remote: %v", command)
	}
	c.kubectlOK("-n", "kube-system", "patch", "daemonset", "kovn-daemon", "--type=json", "-p",
		fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/command/%d","value":"%s"}]`, i, arg))
	c.kubectlOK("-n", "kube-system", "rollout", "status", "daemonset/kovn-daemon", "--timeout=3m")
	if err := eventually(60*time.Second, func() error {
		if got := strings.Trim(c.vsctl(1, "get", "Interface", "kovn-mirror-rem", "type"), "\"\n "); got != "erspan" {
			return fmt.Errorf("c1-n1's kovn-mirror-rem is of type %q", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hex := func(ip string) string {
		a := netip.MustParseAddr(ip).As4()
		return fmt.Sprintf("0x%02x%02x%02x%02x", a[0], a[1], a[2], a[3])
	}
	inner := func(src, dst string, icmpType int) string {
		return fmt.Sprintf("proto gre and ip[22:2] == 0x88be and (ip[32:4] & 0xfffff) == 5 and ip[62:4] == %s and ip[66:4] == %s and ip[70] == %d",
			hex(src), hex(dst), icmpType)
	}
	count := func(out string) int { // packets: lines naming the ERSPAN protocol (twice each)
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "0x88be") {
				n++
			}
		}
		return n
	}
	tries := 0 // as for GRE: the collector's neighbour entry first
	if err := eventually(45*time.Second, func() error {
		if tries++; tries > 1 {
			time.Sleep(11 * time.Second)
		}
		if out := capture(t, cfg.ExtNS(), "any", inner(mIP, pIP, 8), func() { _, _ = c.exec("mir", "m", "ping", "-c", "1", "-W", "1s", pIP) }); count(out) == 0 {
			return fmt.Errorf("no ERSPAN packet of m's echo at the collector yet: %q", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	req := count(capture(t, cfg.ExtNS(), "any", inner(mIP, pIP, 8), func() { c.ping("mir", "m", pIP) }))
	rep := count(capture(t, cfg.ExtNS(), "any", inner(pIP, mIP, 0), func() { c.ping("mir", "m", pIP) }))
	t.Logf("ERSPAN collector (index 5), first packet at try %d: %d requests and %d replies of m's %d echoes (each counted in its own run)", tries, req, rep, pingCount)
	if req != pingCount || rep != pingCount {
		t.Errorf("the ERSPAN collector saw %d requests and %d replies, want %d each", req, rep, pingCount)
	}
}

// pingerStatus is what kubectl kovn status -o json says of kovn-pinger: how many answered
// and the lossy paths; a pinger that does not answer fails the call.
func (c *cluster) pingerStatus() (int, []kovnctl.PathStatus) {
	c.t.Helper()
	out, errOut, _ := c.kubectlKovn("status", "-o", "json") // exit 1 with problems
	var r kovnctl.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		c.t.Fatalf("kubectl kovn status -o json: %v\n%s%s", err, out, errOut)
	}
	if len(r.SilentPingers) > 0 {
		c.t.Logf("pingers not answering kubectl kovn (pods/exec): %v", r.SilentPingers)
	}
	return r.Pingers, r.LossyPaths
}

func pathNames(ps []kovnctl.PathStatus) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Source+"->"+p.Kind+"/"+p.Target+"/"+p.Family)
	}
	sort.Strings(out)
	return out
}

// blockGeneve drops, in node a's own OVS (of cluster cl), geneve packets to address dst: a flow
// on br-phy, the bridge holding the node's address that every tunnel packet leaves through. (A
// qdisc on eth0 would not do: the userspace datapath sends a batch from a packet socket, and
// one dropped packet loses the rest of its batch, to every node.)
func blockGeneve(t *testing.T, cfg rig.Config, cl, a int, dst netip.Addr) {
	t.Helper()
	flow := fmt.Sprintf("priority=65000,udp,nw_dst=%s,tp_dst=6081,actions=drop", dst)
	if out, err := ofctl(cfg, cl, a, "add-flow", flow); err != nil {
		t.Fatalf("blocking geneve on %s: %v %s", rig.NodeName(cl, a), err, out)
	}
}

func unblockGeneve(t *testing.T, cfg rig.Config, cl, a int, dst netip.Addr) {
	t.Helper()
	match := fmt.Sprintf("priority=65000,udp,nw_dst=%s,tp_dst=6081", dst)
	if out, err := ofctl(cfg, cl, a, "--strict", "del-flows", match); err != nil {
		t.Errorf("removing %s's geneve block: %v %s", rig.NodeName(cl, a), err, out)
	}
}

// ofctl runs ovs-ofctl on node a (of cluster cl)'s br-phy through its management socket.
func ofctl(cfg rig.Config, cl, a int, args ...string) ([]byte, error) {
	mgmt := "unix:" + filepath.Join(filepath.Dir(cfg.OVSDBSocket(cl, a)), "br-phy.mgmt")
	n := len(args)
	argv := append(append([]string{}, args[:n-1]...), mgmt, args[n-1])
	if args[0] == "--strict" {
		argv = []string{"--strict", args[1], mgmt, args[2]}
	}
	return exec.Command("ovs-ofctl", argv...).CombinedOutput()
}

// networkQuality: every pinger answers and no path is lossy on a healthy rig, and each kind
// of target is measured; geneve blocked between c1-n1 and c1-n2 makes their pod paths (both
// directions, both families) lossy within 30 s and no path of c1-n3; unblocked, they clear.
func networkQuality(t *testing.T, c *cluster) {
	cfg := c.st.Config
	c.kubectlOK("-n", "kube-system", "rollout", "status", "daemonset/kovn-pinger", "--timeout=3m")
	pod := strings.Fields(c.kubectlOK("-n", "kube-system", "get", "pods", "-l", "app=kovn-pinger", "--field-selector", "spec.nodeName=c1-n1", "-o", "name"))[0]
	wants := []string{`kovn_pinger_probes_total{family="ipv4",kind="node",source="c1-n1",target="c1-n2"}`,
		`kovn_pinger_probes_total{family="ipv6",kind="pod",source="c1-n1",target="c1-n3"}`,
		`kovn_pinger_probes_total{family="",kind="service",source="c1-n1",target="kubernetes.default"}`,
		`kovn_pinger_probes_total{family="",kind="dns",source="c1-n1",target="kubernetes.default.svc.cluster.local"}`,
		`kovn_pinger_probes_total{family="ipv4",kind="external",source="c1-n1",target="172.30.0.100"}`,
		`kovn_pinger_latency_seconds_bucket{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"`,
		`kovn_pinger_lost_total{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"} 0`,
		`kovn_pinger_path_lossy{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"} 0`,
		`kovn_pinger_last_round_timestamp_seconds{source="c1-n1"}`}
	twoRounds := regexp.MustCompile(`kovn_pinger_probes_total\{family="ipv4",kind="pod",source="c1-n1",target="c1-n2"\} ([6-9]|\d\d+)\n`)
	var lossy []kovnctl.PathStatus
	var metrics string
	// Healthy: every pinger answers, c1-n1's has probed c1-n2's pinger in two rounds (its first
	// round may precede the others' start), every kind is measured, no path is lossy.
	if err := eventually(2*time.Minute, func() error {
		var n int
		if n, lossy = c.pingerStatus(); n != 3 || len(lossy) != 0 {
			return fmt.Errorf("%d pingers answer, lossy paths %v", n, pathNames(lossy))
		}
		metrics = c.kubectlOK("-n", "kube-system", "exec", pod, "-c", "pinger", "--", "/kovn-pinger", "--get-metrics")
		if !twoRounds.MatchString(metrics) {
			return fmt.Errorf("c1-n1's pinger has not probed c1-n2's pinger in two rounds yet")
		}
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				return fmt.Errorf("c1-n1's pinger does not export %s", want)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("healthy rig: %v\n%s", err, metrics)
	}
	checkDashboardSeries(t, "kovn-pinger", metrics)

	t.Log("geneve blocked between c1-n1 and c1-n2")
	start := time.Now()
	blockGeneve(t, cfg, 1, 1, cfg.NodeIPs(1, 2)[0])
	blockGeneve(t, cfg, 1, 2, cfg.NodeIPs(1, 1)[0])
	// Each pinger's own view, read from its node (a local path: the API server reaches c1-n2's
	// pods across the cut). DNS and the API server are left out: their answer depends on where
	// CoreDNS and the route to the control plane are.
	var want []string
	for _, pair := range [][2]string{{"c1-n1", "c1-n2"}, {"c1-n2", "c1-n1"}} {
		for _, kind := range []string{"node", "pod"} {
			for _, fam := range []string{"ipv4", "ipv6"} {
				want = append(want, pair[0]+"->"+kind+"/"+pair[1]+"/"+fam)
			}
		}
	}
	sort.Strings(want)
	var got []string
	err := eventually(30*time.Second, func() error {
		var err error
		if got, err = c.lossyFromNodes(t, "node", "pod", "external"); err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("lossy %v", got)
		}
		return nil
	})
	t.Logf("lossy after %.1fs: %v", time.Since(start).Seconds(), got)
	if err != nil {
		t.Errorf("geneve blocked between c1-n1 and c1-n2, within 30 s: %v, want exactly %v", err, want)
	}
	// kubectl kovn reads the pingers through their kubelets (pods/exec), not the pod network:
	// both pingers behind the cut tunnel answer, and it shows what they measured.
	out, _, _ := c.kubectlKovn("status")
	if !strings.Contains(out, "path/c1-n1->pod/c1-n2") || !strings.Contains(out, "LOSSY PATH") || strings.Contains(out, "pinger/") {
		t.Errorf("kubectl kovn status does not name the lossy path, or names a pinger it could not read:\n%s", out)
	} else {
		t.Logf("kubectl kovn status:\n%s", out)
	}

	t.Log("unblocked: the paths clear")
	start = time.Now()
	unblockGeneve(t, cfg, 1, 1, cfg.NodeIPs(1, 2)[0])
	unblockGeneve(t, cfg, 1, 2, cfg.NodeIPs(1, 1)[0])
	if err := eventually(30*time.Second, func() error {
		var err error
		if got, err = c.lossyFromNodes(t, "node", "pod", "external", "dns", "service"); err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("lossy %v", got)
		}
		if _, lossy = c.pingerStatus(); len(lossy) != 0 {
			return fmt.Errorf("kubectl kovn status: lossy %v", pathNames(lossy))
		}
		return nil
	}); err != nil {
		t.Errorf("unblocked, within 30 s: %v", err)
	}
	t.Logf("clear after %.1fs", time.Since(start).Seconds())
}

// pingerMetricsFromNode reads the metrics of the pinger on node n of c from that node's network
// namespace (a local path, whatever the state of the paths between nodes), with the reader's
// token over TLS, as a Prometheus would. An error, not a
// failure: callers wait on it, and a lab just up on a loaded machine may not route its node to
// its pods yet (CI: "no route to host" to the pinger of c1-n1 right after the charts were up).
func (c *cluster) pingerMetricsFromNode(t *testing.T, n int) (string, error) {
	t.Helper()
	cfg := c.st.Config
	cl, _ := nodeIndex(t, c.info.Name+"-n1")
	node := rig.NodeName(cl, n)
	ip := strings.TrimSpace(c.kubectlOK("-n", "kube-system", "get", "pods", "-l", "app=kovn-pinger", "--field-selector",
		"spec.nodeName="+node, "-o", "jsonpath={.items[0].status.podIP}"))
	body, err := nsTestbox(cfg, cfg.NodeNS(cl, n), "get", "-token-file", c.metricsTokenFile(t), "https://"+net.JoinHostPort(ip, "9476")+"/metrics")
	if err != nil {
		return "", fmt.Errorf("%s's pinger metrics from its node: %v %s", node, err, body)
	}
	return body, nil
}

var lossyLine = regexp.MustCompile(`(?m)^kovn_pinger_path_lossy\{family="([^"]*)",kind="([^"]*)",source="([^"]*)",target="([^"]*)"\} 1$`)

// lossyFromNodes reads every pinger's metrics from its own node's network namespace and
// returns its lossy paths of the given kinds, as "source->kind/target/family", sorted.
func (c *cluster) lossyFromNodes(t *testing.T, kinds ...string) ([]string, error) {
	t.Helper()
	cfg := c.st.Config
	var out []string
	for n := 1; n <= cfg.Nodes; n++ {
		body, err := c.pingerMetricsFromNode(t, n)
		if err != nil {
			return nil, err
		}
		for _, m := range lossyLine.FindAllStringSubmatch(body, -1) {
			if slices.Contains(kinds, m[2]) {
				out = append(out, m[3]+"->"+m[2]+"/"+m[4]+"/"+m[1])
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// nodeAppctl runs ovs-appctl against node n's ovs-vswitchd (diagnostics).
func nodeAppctl(cfg rig.Config, n int, args ...string) string {
	ctl := filepath.Join(filepath.Dir(cfg.OVSDBSocket(1, n)), "ovs-vswitchd.ctl")
	out, _ := exec.Command("ovs-appctl", append([]string{"-t", ctl}, args...)...).CombinedOutput()
	return string(out)
}
