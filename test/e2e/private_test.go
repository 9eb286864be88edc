package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kovn/kovn/test/rig"
)

// privateSubnet: a private Subnet isolates its pods from the rest of the cluster, in every
// family of the rig, even against a NetworkPolicy that allows everything in; its own pods,
// each pod's own node (kubelet probes included) and replies to connections its pods open
// still pass, another node does not;
// allowSubnets opens it to a CIDR (one family at a time); private=false opens it and removes
// its ACLs. outside is a pod of the default subnet no NetworkPolicy isolates.
func privateSubnet(t *testing.T, c *cluster, st *rig.State, outside probePod) {
	c.t = t
	cidrs := privateCIDRs(st.Config)
	c.createNamespace("priv")
	c.applySubnet(fmt.Sprintf("{cidrBlock: %q, private: true, namespaces: [priv]}", joinPrefixes(cidrs)))
	c.waitSubnetReady("priv")
	a, b := c.privatePods(cidrs)
	fams := families(st.Config)
	t.Run("own pods reach each other, the outside pod is refused", func(t *testing.T) {
		c.t = t
		c.waitProbe(b, targets(a, fams, 9000), true)
		c.waitProbe(a, targets(b, fams, 9000), true)
		c.assertRefused(outside, targets(a, fams, 9000))
		c.assertRefused(outside, targets(b, fams, 8080))
	})
	t.Run("each node reaches its own private pod, not the other node's", func(t *testing.T) {
		c.t = t
		// a runs on c1-n1, b on c1-n2: only a node's own join address is admitted.
		for n, own := range map[int]probePod{1: a, 2: b} {
			other := map[int]probePod{1: b, 2: a}[n]
			for _, v4 := range fams {
				msg := fmt.Sprintf("from-node-%d", n)
				if out := nodeTestbox(t, st, st.Config.NodeNS(1, n), "tcp", hostPort(own.ipOf(v4).String(), 9000), msg); !strings.Contains(out, msg) {
					t.Fatalf("TCP echo node c1-n%d -> its own pod %s/%s %s: %q", n, own.ns, own.name, own.ipOf(v4), out)
				}
				if out := nodeTestbox(t, st, st.Config.NodeNS(1, n), "connect", hostPort(other.ipOf(v4).String(), 9000)); strings.Contains(out, "connected") {
					t.Errorf("node c1-n%d reached the other node's private pod %s/%s %s: %q", n, other.ns, other.name, other.ipOf(v4), out)
				}
			}
		}
	})
	// No NetworkPolicy selects the private pods yet: the subnet's own stateful ACL is what
	// lets these replies through its drop.
	t.Run("a private pod's connection out gets its replies", func(t *testing.T) {
		c.t = t
		for _, v4 := range fams {
			if out := c.mustExec("priv", "a", "tcp", hostPort(outside.ipOf(v4).String(), 9000), "from-priv"); !strings.Contains(out, "from-priv") {
				t.Fatalf("TCP echo priv/a -> %s: %q", outside.ipOf(v4), out)
			}
		}
	})
	t.Run("a NetworkPolicy admitting everything does not open it", func(t *testing.T) {
		c.t = t
		allowAll := policy("priv", "allow-all", &metav1.LabelSelector{}, networkingv1.NetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})
		if _, err := c.kc.NetworkingV1().NetworkPolicies("priv").Create(context.Background(), &allowAll, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitPolicyPorts("priv/allow-all", 2)
		c.assertRefused(outside, targets(a, fams, 9000))
		c.waitProbe(b, targets(a, fams, 9000), true)
		if err := c.kc.NetworkingV1().NetworkPolicies("priv").Delete(context.Background(), "allow-all", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.waitPolicyPorts("priv/allow-all", 0)
	})
	t.Run("allowSubnets admits the default subnet's CIDR, in its family only", func(t *testing.T) {
		c.t = t
		first := st.Config.PodCIDRs(1)[0]
		c.applySubnet(fmt.Sprintf("{cidrBlock: %q, private: true, namespaces: [priv], allowSubnets: [%q]}", joinPrefixes(cidrs), first))
		v4 := first.Addr().Is4()
		c.waitProbe(outside, targets(a, []bool{v4}, 9000), true)
		if len(fams) == 2 {
			c.assertRefused(outside, targets(a, []bool{!v4}, 9000))
		}
	})
	t.Run("private turned off: open, no ACL left", func(t *testing.T) {
		c.t = t
		c.applySubnet(fmt.Sprintf("{cidrBlock: %q, private: false, namespaces: [priv]}", joinPrefixes(cidrs)))
		c.waitProbe(outside, targets(a, fams, 9000), true)
		c.waitProbe(outside, targets(b, fams, 8080), true)
		if out := c.nbctl("acl-list", "priv"); strings.TrimSpace(out) != "" {
			t.Fatalf("switch priv still has ACLs:\n%s", out)
		}
	})
	t.Run("custom VPC without load balancers: replies still arrive", func(t *testing.T) { privateInCustomVpc(t, c, st) })
}

// privatePods creates priv/a on c1-n1 and priv/b on c1-n2, with kubelet readiness probes, and
// returns them once Ready with their addresses inside cidrs.
func (c *cluster) privatePods(cidrs []netip.Prefix) (probePod, probePod) {
	c.t.Helper()
	var pods [2]probePod
	for i, name := range []string{"a", "b"} {
		p := testboxPod("priv", name, onNode(fmt.Sprintf("c1-n%d", i+1)))
		// kubelet probes from the node's ovn0: they must keep passing the private subnet's drop.
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
		c.createPod(p)
	}
	for i, name := range []string{"a", "b"} {
		p := c.waitReady("priv", name, 90*time.Second)
		pods[i] = probePod{ns: "priv", name: name, ips: p.Status.PodIPs}
		for _, ip := range p.Status.PodIPs {
			if !inAny(ip.IP, cidrs) {
				c.t.Fatalf("pod priv/%s got %s, outside the private subnet %v", name, ip.IP, cidrs)
			}
		}
	}
	return pods[0], pods[1]
}

// privateInCustomVpc: a private subnet of a VPC without Services (so without load balancers,
// which would make its switch stateful by themselves) still gets the replies to connections
// its pod opens to the VPC's other subnet, whose pod it refuses: the subnet's own stateful
// ACL is what lets them through.
func privateInCustomVpc(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	c.createNamespace("gpriv")
	c.createNamespace("gopen")
	cidrs := func(v4, v6 string) string {
		var out []string
		if st.Config.HasIPv4() {
			out = append(out, v4)
		}
		if st.Config.HasIPv6() {
			out = append(out, v6)
		}
		return strings.Join(out, ",")
	}
	if out, err := c.apply(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: Vpc
metadata: {name: green}
spec: {namespaces: [gpriv, gopen]}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: gpriv}
spec: {vpc: green, cidrBlock: %q, private: true, namespaces: [gpriv]}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: gopen}
spec: {vpc: green, cidrBlock: %q, namespaces: [gopen]}
`, cidrs("10.211.0.0/24", "fd00:211::/64"), cidrs("10.212.0.0/24", "fd00:212::/64"))); err != nil {
		t.Fatalf("create Vpc and Subnets: %v %s", err, out)
	}
	c.waitSubnetReady("gpriv")
	c.waitSubnetReady("gopen")
	c.createPod(testboxPod("gpriv", "p", onNode("c1-n1")))
	c.createPod(testboxPod("gopen", "o", onNode("c1-n2")))
	p := probePod{ns: "gpriv", name: "p", ips: c.waitRunning("gpriv", "p", 90*time.Second).Status.PodIPs}
	o := probePod{ns: "gopen", name: "o", ips: c.waitRunning("gopen", "o", 90*time.Second).Status.PodIPs}
	fams := families(st.Config)
	c.waitProbe(p, targets(o, fams, 9000), true)
	for _, v4 := range fams {
		if out := c.mustExec("gpriv", "p", "tcp", hostPort(o.ipOf(v4).String(), 9000), "from-gpriv"); !strings.Contains(out, "from-gpriv") {
			t.Fatalf("TCP echo gpriv/p -> gopen/o %s: %q", o.ipOf(v4), out)
		}
	}
	c.assertRefused(o, targets(p, fams, 9000))
}

// privateCIDRs is the private subnet's CIDR in each family of the rig.
func privateCIDRs(cfg rig.Config) []netip.Prefix {
	var out []netip.Prefix
	if cfg.HasIPv4() {
		out = append(out, netip.MustParsePrefix("10.210.0.0/24"))
	}
	if cfg.HasIPv6() {
		out = append(out, netip.MustParsePrefix("fd00:210::/64"))
	}
	return out
}

// families lists the rig's families as "is IPv4" flags, for probePod.ipOf.
func families(cfg rig.Config) []bool {
	var out []bool
	if cfg.HasIPv4() {
		out = append(out, true)
	}
	if cfg.HasIPv6() {
		out = append(out, false)
	}
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

func inAny(ip string, ps []netip.Prefix) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func targets(p probePod, fams []bool, port uint16) []string {
	var out []string
	for _, v4 := range fams {
		out = append(out, netip.AddrPortFrom(p.ipOf(v4), port).String())
	}
	return out
}

// applySubnet applies the Subnet "priv" with spec (YAML flow mapping).
func (c *cluster) applySubnet(spec string) {
	c.t.Helper()
	if out, err := c.apply("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: priv}\nspec: " + spec + "\n"); err != nil {
		c.t.Fatalf("apply subnet priv: %v %s", err, out)
	}
}

func (c *cluster) waitSubnetReady(name string) {
	c.t.Helper()
	err := eventually(30*time.Second, func() error {
		out, _ := c.kubectl("get", "subnet", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if out != "True" {
			return fmt.Errorf("subnet %s Ready %q", name, out)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// waitPolicyPorts waits until the port group of NetworkPolicy key (namespace/name) holds n
// ports (0: until it is gone), so a check after it runs against the policy as programmed.
func (c *cluster) waitPolicyPorts(key string, n int) {
	c.t.Helper()
	err := eventually(20*time.Second, func() error {
		out := c.nbctl("--bare", "--columns=ports", "find", "Port_Group", fmt.Sprintf("external_ids:\"kovn.io/owner\"=%q", key))
		if got := len(strings.Fields(out)); got != n {
			return fmt.Errorf("policy %s: %d ports in its group, want %d", key, got, n)
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// probeOnce connects from src to every target (1 s connect timeout) and returns the verdicts.
func (c *cluster) probeOnce(src probePod, targets []string) map[string]bool {
	out, _ := c.exec(src.ns, src.name, append([]string{"probe", "-t", "1s"}, targets...)...)
	got := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			got[f[0]] = f[1] == "ok"
		}
	}
	return got
}

// waitProbe waits (20 s at most) until every target is reachable from src (ok) or refused.
func (c *cluster) waitProbe(src probePod, targets []string, ok bool) {
	c.t.Helper()
	start := time.Now()
	err := eventually(20*time.Second, func() error {
		got := c.probeOnce(src, targets)
		for _, a := range targets {
			if got[a] != ok {
				return fmt.Errorf("%s/%s -> %s: ok=%t, want %t", src.ns, src.name, a, got[a], ok)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s/%s -> %v: ok=%t after %.1fs", src.ns, src.name, targets, ok, time.Since(start).Seconds())
}

// assertRefused checks, three times over a few seconds, that no connection from src to the
// targets completes within the probe's 1 s connect timeout.
func (c *cluster) assertRefused(src probePod, targets []string) {
	c.t.Helper()
	for i := 0; i < 3; i++ {
		got := c.probeOnce(src, targets)
		for _, a := range targets {
			if v, seen := got[a]; !seen || v {
				c.t.Fatalf("%s/%s -> %s: connected=%t (answered %t), want refused within 1s", src.ns, src.name, a, v, seen)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.t.Logf("%s/%s -> %v: refused (connect timed out after 1s), 3 times", src.ns, src.name, targets)
}
