package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

var probePorts = []int32{8080, 9000}

// TestNetworkPolicy: a 3 namespace x 3 pod probe matrix (every pod to every pod on ports 8080
// and 9000, both families) compared after each step with the truth table the NetworkPolicy
// model (netpol_model_test.go) computes from the same policies.
func TestNetworkPolicy(t *testing.T) {
	concurrent(t) // waits on conditions only: no loss counted, nothing timed
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	pods := c.policyPods()
	var policies []networkingv1.NetworkPolicy
	step := func(name string, change func()) {
		t.Run(name, func(t *testing.T) {
			c.t = t
			change()
			c.waitMatrix(pods, policies)
		})
	}
	apply := func(np networkingv1.NetworkPolicy) {
		for i := range policies {
			if policies[i].Namespace == np.Namespace && policies[i].Name == np.Name {
				got, err := c.kc.NetworkingV1().NetworkPolicies(np.Namespace).Get(context.Background(), np.Name, metav1.GetOptions{})
				if err != nil {
					c.t.Fatal(err)
				}
				got.Spec = np.Spec
				if _, err := c.kc.NetworkingV1().NetworkPolicies(np.Namespace).Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
					c.t.Fatal(err)
				}
				policies[i] = np
				return
			}
		}
		if _, err := c.kc.NetworkingV1().NetworkPolicies(np.Namespace).Create(context.Background(), &np, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		policies = append(policies, np)
	}
	remove := func(ns, name string) {
		if err := c.kc.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			c.t.Fatal(err)
		}
		for i := range policies {
			if policies[i].Namespace == ns && policies[i].Name == name {
				policies = append(policies[:i], policies[i+1:]...)
				return
			}
		}
	}
	xa := pods[0]
	step("no policy: everything allowed", func() {})
	step("default deny ingress in y", func() { apply(policy("y", "deny", nil, ingressOnly())) })
	step("allow y/a from namespace x", func() { apply(policy("y", "ya", sel("pod", "a"), from(nsPeer("ns", "x")))) })
	step("allow y/b from pods c of y", func() { apply(policy("y", "yb", sel("pod", "b"), from(podPeer("pod", "c")))) })
	step("allow y/c from pods a of namespace z (both selectors)", func() {
		apply(policy("y", "yc", sel("pod", "c"), from(networkingv1.NetworkPolicyPeer{
			NamespaceSelector: sel("ns", "z"), PodSelector: sel("pod", "a")})))
	})
	step("z/a: ipBlock of the pod CIDRs except x/a", func() {
		var peers []networkingv1.NetworkPolicyPeer
		for _, cidr := range cfg.PodCIDRs(1) {
			except := netip.PrefixFrom(xa.ipOf(cidr.Addr().Is4()), cidr.Addr().BitLen())
			peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr.String(), Except: []string{except.String()}}})
		}
		apply(policy("z", "za", sel("pod", "a"), from(peers...)))
	})
	step("egress deny for x/b", func() {
		np := policy("x", "xb-egress", sel("pod", "b"), networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}})
		apply(np)
	})
	step("z/b: named port http from namespace x", func() {
		spec := from(nsPeer("ns", "x"))
		spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{{Port: ptrTo(intstr.FromString("http"))}}
		apply(policy("z", "zb", sel("pod", "b"), spec))
	})
	step("z/c: port range 8000-8090 from everywhere", func() {
		spec := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptrTo(intstr.FromInt32(8000)), EndPort: ptrTo(int32(8090))}}}}}
		apply(policy("z", "zc", sel("pod", "c"), spec))
	})
	step("policy updated: y/a from namespace z instead of x", func() { apply(policy("y", "ya", sel("pod", "a"), from(nsPeer("ns", "z")))) })
	step("policy deleted: default deny in y", func() { remove("y", "deny") })
	step("two policies on y/a: a union", func() {
		apply(policy("y", "ya2", sel("pod", "a"), from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("ns", "x"), PodSelector: sel("pod", "c")})))
	})
	step("x/b may egress to z/a only", func() {
		np := policy("x", "xb-egress", sel("pod", "b"), networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: sel("ns", "z"), PodSelector: sel("pod", "a")}}}}})
		apply(np)
	})
	t.Run("egress is evaluated after load balancing: z/a's ClusterIP allowed, z/b's denied", func(t *testing.T) {
		c.t = t
		za := c.createService(policyService("za", "a"))
		zb := c.createService(policyService("zb", "b"))
		var targets []string
		for _, ip := range append(append([]string{}, za...), zb...) {
			targets = append(targets, hostPort(ip, 80))
		}
		want := map[string]string{}
		for i, a := range targets {
			want[a] = map[bool]string{true: "ok", false: "fail"}[i < len(za)]
		}
		var out string
		if err := eventually(20*time.Second, func() error {
			out, _ = c.exec("x", "b", append([]string{"probe", "-t", "500ms"}, targets...)...)
			for a, w := range want {
				if !strings.Contains(out, a+" "+w) {
					return fmt.Errorf("%s: want %s", a, w)
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("x/b -> ClusterIPs of z/a (allowed) and z/b (denied): %v\n%s", err, out)
		}
		t.Logf("x/b through ClusterIPs: %s", strings.Join(strings.Fields(out), " "))
	})
	t.Run("peer address sets: one per selector and family, shared, freed with their last policy", func(t *testing.T) {
		c.t = t
		sets := c.peerAddressSets()
		// ya moved from namespace x to z; zb still admits namespace x: the ns=x set is zb's alone.
		x := sets[topology.PeerAddressSet(topology.PeerSelector("", "ns=x", "", false), "ip4")]
		if !slices.Equal(x, []string{"NetworkPolicy:z/zb"}) {
			t.Errorf("users of the ns=x set: %v, want z/zb only (all sets: %v)", x, sets)
		}
		for name, users := range sets {
			if len(users) == 0 {
				t.Errorf("address set %s has no user", name)
			}
		}
		t.Logf("%d peer address sets for %d policies", len(sets), len(policies))
	})
	t.Run("kubelet probes still reach every isolated pod", func(t *testing.T) {
		c.t = t
		for _, p := range pods {
			c.waitReady(p.ns, p.name, 10*time.Second)
		}
	})
	// x/a: a default-subnet pod no policy above isolates, in ingress or egress.
	t.Run("private subnet", func(t *testing.T) { privateSubnet(t, c, r.State, xa) })
	t.Run("Subnet ACLs", func(t *testing.T) { subnetACLs(t, c, r.State, xa) })
	t.Run("every policy deleted: no peer address set left", func(t *testing.T) {
		c.t = t
		for _, np := range slices.Clone(policies) {
			remove(np.Namespace, np.Name)
		}
		if err := eventually(10*time.Second, func() error {
			if sets := c.peerAddressSets(); len(sets) > 0 {
				return fmt.Errorf("left: %v", sets)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// peerAddressSets lists the northbound's shared peer address sets, each with its users
// ("NetworkPolicy:<namespace>/<name>"), sorted.
func (c *cluster) peerAddressSets() map[string][]string {
	c.t.Helper()
	out := map[string][]string{}
	rows := c.nbctl("--bare", "--columns=name,external_ids", "find", "Address_Set",
		"external_ids:\"kovn.io/owner-type\"="+topology.OwnerPolicyPeer)
	var name string
	for _, l := range strings.Split(rows, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "kovn_peer_"):
			name = l
			out[name] = nil
		case name != "" && l != "":
			for _, kv := range strings.Fields(l) {
				if u, ok := strings.CutPrefix(kv, "kovn.io/user:"); ok { // bare: key=value, unquoted
					u, _, _ = strings.Cut(u, "=")
					out[name] = append(out[name], u)
				}
			}
			slices.Sort(out[name])
		}
	}
	return out
}

// policyPods creates namespaces x, y, z (label ns=<name>) with pods a, b, c (label pod=<name>,
// named port http = 8080, readiness probe from kubelet) on the cluster's nodes in turn and
// returns them with their addresses.
func (c *cluster) policyPods(nodes ...string) []probePod {
	c.t.Helper()
	if len(nodes) == 0 {
		nodes = []string{"c1-n1", "c1-n2"}
	}
	var pods []probePod
	for _, ns := range []string{"x", "y", "z"} {
		c.createNamespace(ns)
		if out, err := c.kubectl("label", "namespace", ns, "ns="+ns); err != nil {
			c.t.Fatalf("label namespace: %v %s", err, out)
		}
		for i, name := range []string{"a", "b", "c"} {
			c.createPod(policyPod(ns, name, nodes[i%len(nodes)]))
		}
	}
	for _, ns := range []string{"x", "y", "z"} {
		for _, name := range []string{"a", "b", "c"} {
			pods = append(pods, c.readyProbePod(ns, name))
		}
	}
	return pods
}

// policyPod is a probe matrix pod: label pod=<name>, named port http = 8080, a readiness probe.
func policyPod(ns, name, node string) *corev1.Pod {
	p := testboxPod(ns, name, onNode(node))
	p.Labels = map[string]string{"pod": name}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
	return p
}

// readyProbePod waits for a policyPod to be ready and returns it as the model sees it.
func (c *cluster) readyProbePod(ns, name string) probePod {
	p := c.waitReady(ns, name, 90*time.Second)
	pp := probePod{ns: ns, name: name, labels: p.Labels, nsLabels: map[string]string{"ns": ns}, ports: map[string]int32{"http": 8080}}
	pp.ip = netip.MustParseAddr(p.Status.PodIPs[0].IP)
	pp.ips = p.Status.PodIPs
	return pp
}

func (p probePod) ipOf(v4 bool) netip.Addr {
	for _, ip := range p.ips {
		if a := netip.MustParseAddr(ip.IP); a.Is4() == v4 {
			return a
		}
	}
	return netip.Addr{}
}

// waitMatrix probes every pair until the matrix equals the model's truth table in both
// families (30 s at most), then logs how long that took and how many pairs were allowed. Each
// source pod probes all its targets, both families, in one exec, and the sources probe side
// by side (matrixExecs at a time): a pass costs a few execs' time, not 18 of them one by one.
func (c *cluster) waitMatrix(pods []probePod, policies []networkingv1.NetworkPolicy) {
	c.t.Helper()
	c.waitMatrixIn(pods, map[string][]networkingv1.NetworkPolicy{"": policies})
}

// waitMatrixIn is waitMatrix over a clusterset: each pod's probes run in its own cluster
// (probePod.on) and the model applies each cluster's policies to its pods.
func (c *cluster) waitMatrixIn(pods []probePod, byCluster map[string][]networkingv1.NetworkPolicy) {
	c.t.Helper()
	start := time.Now()
	var diff []string
	var allowedN, deniedN int
	err := eventually(30*time.Second, func() error {
		diff, allowedN, deniedN = nil, 0, 0
		var mu sync.Mutex
		var wg sync.WaitGroup
		slots := make(chan struct{}, matrixExecs)
		for _, src := range pods {
			var targets []string
			want := map[string]bool{}
			for _, v4 := range []bool{true, false} {
				for _, dst := range pods {
					for _, port := range probePorts {
						s, d := src, dst
						s.ip, d.ip = src.ipOf(v4), dst.ipOf(v4)
						addr := netip.AddrPortFrom(d.ip, uint16(port)).String()
						targets = append(targets, addr)
						want[addr] = allowedIn(byCluster, s, d, port)
						if want[addr] {
							allowedN++
						} else {
							deniedN++
						}
					}
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				slots <- struct{}{}
				on := c
				if src.on != nil {
					on = src.on
				}
				got, err := probeAll(on, src, "500ms", targets)
				if err != nil {
					<-slots
					mu.Lock()
					defer mu.Unlock()
					diff = append(diff, fmt.Sprintf("%s%s/%s: no verdict: %v", clusterPrefix(src), src.ns, src.name, err))
					return
				}
				// An allowed connection that timed out gets one more try, 2 s long: on a loaded
				// machine (CI runs labs side by side) a SYN can take longer than 500 ms, and a
				// pair the policy really denies fails again. Denied pairs are judged as probed.
				var retry []string
				for _, a := range targets {
					if want[a] && !got[a] {
						retry = append(retry, a)
					}
				}
				if len(retry) > 0 {
					again, err := probeAll(on, src, "2s", retry)
					if err != nil {
						c.t.Logf("retry of %d timed-out pairs: %v", len(retry), err)
					}
					for a, ok := range again {
						got[a] = ok
					}
				}
				<-slots
				mu.Lock()
				defer mu.Unlock()
				for _, a := range targets {
					if got[a] != want[a] {
						diff = append(diff, fmt.Sprintf("%s%s/%s -> %s: got %t, want %t", clusterPrefix(src), src.ns, src.name, a, got[a], want[a]))
					}
				}
			}()
		}
		wg.Wait()
		if len(diff) > 0 {
			return fmt.Errorf("%d pairs differ", len(diff))
		}
		return nil
	})
	if err != nil {
		sort.Strings(diff)
		c.t.Fatalf("probe matrix after 30s: %v\n%s", err, strings.Join(diff, "\n"))
	}
	c.t.Logf("matrix matches the model after %.1fs: %d allowed, %d denied (pairs x ports x families)", time.Since(start).Seconds(), allowedN, deniedN)
}

// probeAll opens a TCP connection from src to each target (testbox probe, all at once, each
// with the given timeout) and says which connected. A kubectl exec that fails (the API server
// or the kubelet slow on a loaded machine) gives no verdict at all, never "denied": it is tried
// again, three times at most, and its error returned if none printed a verdict for every target.
func probeAll(on *cluster, src probePod, timeout string, targets []string) (map[string]bool, error) {
	var err error
	for range 3 {
		var out string
		out, err = on.exec(src.ns, src.name, append([]string{"probe", "-t", timeout}, targets...)...)
		got := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				got[f[0]] = f[1] == "ok"
			}
		}
		if err == nil && len(got) == len(targets) {
			return got, nil
		}
		if err == nil {
			err = fmt.Errorf("probe printed %d verdicts for %d targets:\n%s", len(got), len(targets), out)
		}
	}
	return nil, fmt.Errorf("%s/%s: %w", src.ns, src.name, err)
}

func clusterPrefix(p probePod) string {
	if p.cluster == "" {
		return ""
	}
	return p.cluster + ":"
}

// matrixExecs is how many probe execs waitMatrix runs at once.
const matrixExecs = 4

func policy(ns, name string, podSel *metav1.LabelSelector, spec networkingv1.NetworkPolicySpec) networkingv1.NetworkPolicy {
	if podSel != nil {
		spec.PodSelector = *podSel
	}
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func ingressOnly() networkingv1.NetworkPolicySpec {
	return networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}
}

func from(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
	return networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: peers}}}
}

func sel(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}
func nsPeer(k, v string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(k, v)}
}
func podPeer(k, v string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: sel(k, v)}
}
func ptrTo[T any](v T) *T { return &v }

// policyService is a dual-stack Service in namespace z for the pod named pod, port 80 -> 8080.
func policyService(name, pod string) *corev1.Service {
	dual := corev1.IPFamilyPolicyPreferDualStack
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "z", Name: name}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"pod": pod}, IPFamilyPolicy: &dual,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}
