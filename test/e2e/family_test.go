package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/test/rig"
)

// familyChecks proves pod networking over one family (IPv6 when v6) between pod a on c1-n1
// and pod b on c1-n2: pod<->pod (ping, TCP), pod->node, node->pod, kubelet probes, egress to
// the external host with the node's address as source, a static address, the default route and
// OVN's router advertisement.
func familyChecks(t *testing.T, c *cluster, st *rig.State, v6 bool, a, b *corev1.Pod) {
	fam, aIP, bIP := "IPv4", podIP(t, a, v6), podIP(t, b, v6)
	nodeIP, ext, cidr := rig.NodeIP, rig.ExternalHostIP(), rig.PodCIDR(1)
	if v6 {
		fam, nodeIP, ext, cidr = "IPv6", rig.NodeIP6, rig.ExternalHostIP6(), rig.PodCIDR6(1)
	}
	n1, n2 := nodeIP(1, 1), nodeIP(1, 2)
	t.Run(fam+": pod-to-pod across nodes, ping and TCP both ways", func(t *testing.T) {
		c.t = t
		c.pingNewPeer("default", "a", bIP)
		c.ping("default", "b", aIP)
		for _, x := range [][3]string{{"a", bIP, "from-a"}, {"b", aIP, "from-b"}} {
			if out := c.mustExec("default", x[0], "tcp", hostPort(x[1], 9000), x[2]); !strings.Contains(out, x[2]) {
				t.Fatalf("TCP echo %s -> %s: %q", x[0], x[1], out)
			}
		}
	})
	t.Run(fam+": pod to both nodes, node to pod", func(t *testing.T) {
		c.t = t
		for _, ip := range []netip.Addr{n1, n2} {
			c.ping("default", "a", ip.String())
			c.mustExec("default", "a", "connect", hostPort(ip.String(), 10250)) // kubelet's port
		}
		for node, ns := range map[string]string{"c1-n1": st.Config.NodeNS(1, 1), "c1-n2": st.Config.NodeNS(1, 2)} {
			out := nodeTestbox(t, st, ns, "ping", "-c", fmt.Sprint(pingCount), "-W", "1s", aIP)
			if _, err := pingResult(out, pingCount, false); err != nil {
				t.Fatalf("ping %s from node %s: %v\n%s", aIP, node, err, out)
			}
			if out := nodeTestbox(t, st, ns, "tcp", hostPort(aIP, 9000), "from-"+node); !strings.Contains(out, "from-"+node) {
				t.Fatalf("TCP echo node %s -> pod a: %q", node, out)
			}
		}
	})
	t.Run(fam+": pod to external host, SNAT to its node's address", func(t *testing.T) {
		c.t = t
		c.ping("default", "b", ext.String())
		url := "http://" + hostPort(ext.String(), 8080) + "/"
		if got := egressNode(c, "default", "b", map[string]string{n1.String(): "c1-n1", n2.String(): "c1-n2"}, url); got != "c1-n2" {
			t.Fatalf("external host saw the request from %q, want b's node c1-n2 (%s)", got, n2)
		}
	})
	t.Run(fam+": default route, router advertisement", func(t *testing.T) {
		c.t = t
		out := c.mustExec("default", "a", "ip")
		def, gw := "0.0.0.0/0", cidr.Masked().Addr().Next()
		if v6 {
			def = "::/0"
		}
		if want := fmt.Sprintf("route %s via %s dev eth0", def, gw); !strings.Contains(out, want) {
			t.Fatalf("pod a has no %q:\n%s", want, out)
		}
		if !v6 {
			return
		}
		out = c.mustExec("default", "a", "rs")
		if !strings.Contains(out, "router advertisement from fe80::") || !strings.Contains(out, "managed=true") ||
			!strings.Contains(out, "prefix="+cidr.String()) {
			t.Fatalf("router solicitation from pod a: want OVN's advertisement (link-local source, managed, prefix %s), got %q", cidr, out)
		}
		t.Logf("pod a: %s", strings.TrimSpace(out))
	})
	t.Run(fam+": static address honoured, kubelet probes it, reused at once with a new MAC", func(t *testing.T) {
		c.t = t
		static := staticAddr(cidr)
		name := "static-" + strings.ToLower(fam)
		p := testboxPod("default", name, onNode("c1-n2"), withAnnotations(annotation.IPAddress, static.String()))
		// kubelet probes the pod's primary address unless told a host: name the static one so
		// the probe crosses ovn0 in the family under test.
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Host: static.String(), Port: intstr.FromInt32(8080), Path: "/"}}}
		c.createPod(p)
		c.waitRunning("default", p.Name, 90*time.Second)
		q := c.waitReady("default", p.Name, 60*time.Second)
		if got := podIP(t, q, v6); got != static.String() {
			t.Fatalf("static pod has %v, want %s", q.Status.PodIPs, static)
		}
		if out := c.mustExec("default", p.Name, "ip"); !strings.Contains(out, netip.PrefixFrom(static, cidr.Bits()).String()) {
			t.Fatalf("inside the pod: %s", out)
		}
		c.ping("default", "a", static.String())
		// The address moves to a new pod with another MAC. Pod a still has a neighbour entry
		// for it with the old MAC: only the new pod's announcement (unsolicited neighbour
		// advertisement / gratuitous ARP) fixes that before a's pings are lost.
		c.deletePod("default", name)
		c.waitIPObjectGone(name + ".default")
		mac := "02:00:00:10:04:01"
		if v6 {
			mac = "02:00:00:10:06:01"
		}
		// Another pod name: recreating a pod under the same name at once makes ovn-controller
		// see two interfaces bound to one port for a moment ("Multiple bindings ... force
		// recompute"), and that recompute cost a later test a packet once; that is not what
		// this checks.
		again := name + "-again"
		c.createPod(testboxPod("default", again, onNode("c1-n2"),
			withAnnotations(annotation.IPAddress, static.String(), annotation.MACAddress, mac)))
		c.waitRunning("default", again, 90*time.Second)
		// CI lost seq 1 here now and then (stops 32-36): the announcement racing the new port's
		// flows is suspected, not proven. The rest must answer; the first loss is logged.
		if c.pingVerdict("default", "a", static.String(), true) {
			t.Logf("the first echo to %s after the MAC change was lost", static)
		}
		c.deletePod("default", again)
		c.waitIPObjectGone(again + ".default")
	})
}

// waitIPObjectGone waits until kovn has released an address (its IP object is deleted).
func (c *cluster) waitIPObjectGone(name string) {
	c.t.Helper()
	if err := eventually(60*time.Second, func() error {
		if out, _ := c.kubectl("get", "ip", name, "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
			return fmt.Errorf("IP object %s still there", name)
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
}

// staticAddr is an address deep inside cidr that the IPAM will not have handed out.
func staticAddr(cidr netip.Prefix) netip.Addr {
	b := cidr.Masked().Addr().AsSlice()
	b[len(b)-2], b[len(b)-1] = 0x64, 0x65
	a, _ := netip.AddrFromSlice(b)
	return a
}

// podIP is the pod's address of one family.
func podIP(t *testing.T, p *corev1.Pod, v6 bool) string {
	t.Helper()
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() == v6 {
			return ip.IP
		}
	}
	t.Fatalf("pod %s/%s has no IPv6=%t address: %v", p.Namespace, p.Name, v6, p.Status.PodIPs)
	return ""
}

func hostPort(ip string, port int) string {
	return netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(port)).String()
}

// nodeTestbox runs the testbox binary in a node's network namespace (the rig made it; the
// traffic stays between the rig's namespaces).
func nodeTestbox(t *testing.T, st *rig.State, ns string, args ...string) string {
	t.Helper()
	bin := filepath.Join(st.Config.KovnBinDir, "kovn-testbox")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (make build)", bin, err)
	}
	out, _ := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...).CombinedOutput()
	return string(out)
}
