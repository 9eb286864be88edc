package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/kovnctl"
	"github.com/kovn/kovn/test/rig"
)

// TestObserve: seeing the data plane on kovn installed from the chart (kubectl kovn reads the
// chart's pods): ACL logs.
func TestObserve(t *testing.T) {
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn, cfg.IPFamily, cfg.Install = true, rig.Dual, rig.InstallChart
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	t.Run("ACL logging of a namespace's policies and of a Subnet rule", func(t *testing.T) {
		c.t = t
		aclLogging(t, c)
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
			want = "true\n" + severity + "\nkovn_acl_log"
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
