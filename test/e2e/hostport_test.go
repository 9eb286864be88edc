package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/test/rig"
)

// hostPorts: pods on c1-n2 publish container ports on the node (kovn-daemon translates them;
// the rig has no portmap plugin and no kube-proxy). hostPort 8080 is TCP on one pod and UDP
// on another; hostPort 8081 is bound to the node's IPv4 address by one pod and to its IPv6
// address by another. Each is reached at nodeIP:hostPort from the external host, from the
// node itself (hairpin), from the other node and from a pod on each node, and must be
// answered by exactly the pod publishing it. A pod's deletion takes its hostPort away, also
// while kovn-daemon is down, and a restarted daemon rebuilds what remains from the API.
func hostPorts(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	cfg := st.Config
	node, nodeIPs := "c1-n2", cfg.NodeIPs(1, 2)
	hp := func(name string, ports ...corev1.ContainerPort) {
		p := testboxPod("svc", name, onNode(node))
		p.Spec.Containers[0].Ports = ports
		c.createPod(p)
	}
	hp("hp-tcp", corev1.ContainerPort{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP})
	hp("hp-udp", corev1.ContainerPort{ContainerPort: 9001, HostPort: 8080, Protocol: corev1.ProtocolUDP})
	onIP := map[string]string{} // node address -> the pod publishing 8081 on it alone
	for _, ip := range nodeIPs {
		name := "hp-on4"
		if ip.Is6() {
			name = "hp-on6"
		}
		hp(name, corev1.ContainerPort{ContainerPort: 8080, HostPort: 8081, HostIP: ip.String(), Protocol: corev1.ProtocolTCP})
		onIP[ip.String()] = name
	}
	for _, p := range append([]string{"hp-tcp", "hp-udp"}, sortedValues(onIP)...) {
		c.waitReady("svc", p, 90*time.Second)
	}
	ext := cfg.ExtNS()
	for _, ip := range nodeIPs {
		tcp, only := "http://"+bracket(ip)+":8080/", "http://"+bracket(ip)+":8081/"
		waitAnswered(t, ip.String()+":8080/tcp from outside", "hp-tcp", func() string { return nodeTestbox(t, st, ext, "get", "-n", "5", tcp) })
		waitAnswered(t, ip.String()+":8080/udp from outside", "hp-udp", func() string { return udpFrom(t, st, ext, ip) })
		waitAnswered(t, ip.String()+":8081 from outside", onIP[ip.String()], func() string { return nodeTestbox(t, st, ext, "get", "-n", "5", only) })
		waitAnswered(t, ip.String()+":8080 from c1-n2 itself", "hp-tcp", func() string { return nodeTestbox(t, st, cfg.NodeNS(1, 2), "get", "-n", "5", tcp) })
		waitAnswered(t, ip.String()+":8080 from c1-n1", "hp-tcp", func() string { return nodeTestbox(t, st, cfg.NodeNS(1, 1), "get", "-n", "5", tcp) })
		for _, pod := range []string{"client", "hp-udp"} { // on c1-n1 and on c1-n2
			waitAnswered(t, ip.String()+":8080 from pod "+pod, "hp-tcp", func() string { out, _ := c.exec("svc", pod, "get", "-n", "5", tcp); return out })
		}
	}
	hostPortNotOnJoin(t, c, st, node)
	// Deleting a pod removes its translation: the node's port is its own again (and nothing
	// listens there).
	onV4 := nodeIPs[0:1]
	c.deletePod("svc", onIP[onV4[0].String()])
	waitRefused(t, st, ext, onV4, "8081")
	hostPortsAfterDaemonRestart(t, c, st)
	t.Logf("hostPort 8080 TCP and UDP, 8081 on %v: answered by their pods from outside, both nodes and pods; gone with the pod", sortedKeys(onIP))
}

// hostPortsAfterDaemonRestart: with c1-n2's kovn-daemon stopped, its hostPort chains are
// flushed (as after a node reboot) and hp-tcp is deleted. The restarted daemon must publish
// hp-udp again from the Pod objects alone, and not hp-tcp.
func hostPortsAfterDaemonRestart(t *testing.T, c *cluster, st *rig.State) {
	cfg := st.Config
	stopComponent(t, c, "c1-n2", "kovn-daemon", false)
	started := false
	defer func() { // never leave the node without its daemon for the subtests that follow
		if !started {
			startComponent(t, c, "c1-n2", "kovn-daemon")
		}
	}()
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if out, err := exec.Command("ip", "netns", "exec", cfg.NodeNS(1, 2), ipt, "-t", "nat", "-F", "KOVN-HOSTPORTS").CombinedOutput(); err != nil {
			t.Fatalf("flush %s KOVN-HOSTPORTS on c1-n2: %v %s", ipt, err, out)
		}
	}
	c.deletePod("svc", "hp-tcp")
	ext, ips := cfg.ExtNS(), cfg.NodeIPs(1, 2)
	// One datagram from a port no earlier flow used: a conntrack entry left by one could
	// still carry the old translation.
	if out := nodeTestbox(t, st, ext, "udp", "-sport", "40811", "-W", "300ms", bracket(ips[0])+":8080", "hi"); strings.Contains(out, "hp-udp") {
		t.Fatalf("hp-udp answers with the chain flushed and the daemon down: %s", out)
	}
	start := time.Now()
	startComponent(t, c, "c1-n2", "kovn-daemon")
	started = true
	for _, ip := range ips {
		waitAnswered(t, ip.String()+":8080/udp after the daemon's restart", "hp-udp", func() string { return udpFrom(t, st, ext, ip) })
	}
	t.Logf("kovn-daemon restarted: hp-udp answers again %.1fs after the start", time.Since(start).Seconds())
	waitRefused(t, st, ext, ips, "8080")
}

// udpFrom sends five datagrams, each from a new socket (a new flow), to ip:8080.
func udpFrom(t *testing.T, st *rig.State, ns string, ip netip.Addr) string {
	return nodeTestbox(t, st, ns, "udp", "-each", "-n", "5", "-i", "20ms", "-W", "300ms", bracket(ip)+":8080", "hi")
}

// waitRefused waits until ip:port refuses a TCP connection from the external host, for every
// ip: no hostPort translation is left, and nothing listens on the node.
func waitRefused(t *testing.T, st *rig.State, ext string, ips []netip.Addr, port string) {
	t.Helper()
	for _, ip := range ips {
		var out string
		err := eventually(30*time.Second, func() error {
			if out = nodeTestbox(t, st, ext, "connect", bracket(ip)+":"+port); !strings.Contains(out, "refused") {
				return fmt.Errorf("not refused")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s:%s: want refused (no hostPort left): %v\n%s", ip, port, err, out)
		}
	}
}

// hostPortNotOnJoin: a hostPort bound to one node address does not capture another address of
// the node in the same family (ovn0's join address, reached from the node itself).
func hostPortNotOnJoin(t *testing.T, c *cluster, st *rig.State, node string) {
	n, err := c.kc.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joins, err := annotation.ParseAddrs(n.Annotations[annotation.JoinIP])
	if err != nil {
		t.Fatalf("node %s join addresses: %v", node, err)
	}
	for _, j := range joins {
		if out := nodeTestbox(t, st, st.Config.NodeNS(1, 2), "connect", bracket(j)+":8081"); !strings.Contains(out, "refused") {
			t.Fatalf("%s:8081 (ovn0 of %s, no hostPort bound to it): want refused, got %s", j, node, out)
		}
	}
}

// waitAnswered polls until every answer (testbox get or udp: "HOSTNAME ...") comes from want.
func waitAnswered(t *testing.T, what, want string, try func() string) {
	t.Helper()
	var out string
	err := eventually(30*time.Second, func() error {
		out = try()
		got := answeredBy(out)
		if strings.Contains(out, "error") || strings.Contains(out, "timeout") || len(got) != 1 || got[0] != want {
			return fmt.Errorf("answered by %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: want answers from %s only: %v\n%s", what, want, err, out)
	}
}

// answeredBy lists the distinct hostPort pods in testbox answers.
func answeredBy(out string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.HasPrefix(f[0], "hp-") {
			seen[f[0]] = true
		}
	}
	return sortedKeys(seen)
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
