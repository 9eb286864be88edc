package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/test/rig"
)

// clustersetPolicy: NetworkPolicy peers in other clusters of the set. Namespaces x, y, z with
// pods a, b, c in both c1 (az1) and c2 (az2), the same names in both (KEP-1645 namespace
// sameness); c2 publishes x. The probe matrix covers all 18 pods, both families, each pair
// judged by the model over both clusters' policies.
// It returns the addresses of c2's x/a, which c1's policies admit.
func clustersetPolicy(t *testing.T, cfg rig.Config, c1, c2 *cluster) []string {
	clusters := []*cluster{c1, c2}
	var pods []probePod
	for i, c := range clusters {
		c.t = t
		for _, p := range c.policyPods(rig.NodeName(i+1, 1)) {
			p.cluster, p.on = fmt.Sprintf("az%d", i+1), c
			pods = append(pods, p)
		}
	}
	if out, err := c2.kubectl("label", "namespace", "x", annotation.PublishPeersLabel+"="+annotation.PublishPeersValue); err != nil {
		t.Fatalf("publishing c2's x: %v %s", err, out)
	}
	for i := range pods {
		pods[i].published = pods[i].cluster == "az2" && pods[i].ns == "x"
	}
	byCluster := map[string][]networkingv1.NetworkPolicy{}
	apply := func(c *cluster, id string, np networkingv1.NetworkPolicy) {
		c.t.Helper()
		if _, err := c.kc.NetworkingV1().NetworkPolicies(np.Namespace).Create(context.Background(), &np, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		byCluster[id] = append(byCluster[id], np)
	}
	step := func(name string, change func()) {
		t.Run(name, func(t *testing.T) {
			c1.t, c2.t = t, t
			change()
			c1.waitMatrixIn(pods, byCluster)
		})
	}
	inCluster := func(ns, id string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"ns": ns, annotation.ClusterLabel: id}}
	}
	step("no policy: every pod of both clusters reaches every other, no NAT", func() {})
	step("c1: y admits x/a of az2 only (not c1's own x/a)", func() {
		apply(c1, "az1", policy("y", "from-az2-xa", nil, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: inCluster("x", "az2"), PodSelector: sel("pod", "a")})))
	})
	step("c1: z/b egresses only to namespace x of every cluster", func() {
		apply(c1, "az1", policy("z", "zb-to-x", sel("pod", "b"), networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"ns": "x"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: annotation.ClusterLabel, Operator: metav1.LabelSelectorOpExists}}}}}}}}))
	})

	xa := podIndex(pods, "az2", "x", "a")
	t.Run("c2's x/a deleted and recreated: its old address leaves c1's sets, the new one enters, the matrix follows", func(t *testing.T) {
		c1.t, c2.t = t, t
		old := pods[xa]
		c2.deletePod("x", "a")
		gone := c2.waitPodGone("x", "a")
		var oldIPs []string
		for _, ip := range old.ips {
			oldIPs = append(oldIPs, ip.IP)
		}
		left := c1.waitPeerSets(oldIPs, false)
		t.Logf("c2's x/a (%v) gone from c2's API; its addresses left c1's peer address sets %s later", old.ips, left.Sub(gone).Round(time.Millisecond))
		c2.createPod(policyPod("x", "a", rig.NodeName(2, 1)))
		addressed := c2.waitIPObject("x", "a")
		var ips []string
		for _, a := range addressed.addrs {
			ips = append(ips, a.String())
		}
		if slices.Contains(oldIPs, ips[0]) {
			t.Fatalf("the new x/a has its old address %v: the test needs a new one", ips)
		}
		entered := c1.waitPeerSets(addressed.podIPs(), true)
		t.Logf("c2's new x/a addressed %v (IP object seen); in c1's peer address sets %s later", ips, entered.Sub(addressed.at).Round(time.Millisecond))
		p := c2.readyProbePod("x", "a")
		p.cluster, p.on, p.published = "az2", c2, true
		pods[xa] = p
		c1.waitMatrixIn(pods, byCluster)
	})

	t.Run("bad input: an unknown cluster and a namespace az2 does not publish select nothing and say so; a good policy changed to one keeps its last good spec", func(t *testing.T) {
		c1.t, c2.t = t, t
		apply(c1, "az1", policy("y", "from-az9", sel("pod", "b"), from(networkingv1.NetworkPolicyPeer{NamespaceSelector: inCluster("x", "az9")})))
		msg := c1.waitEventWith("y", "from-az9", "ClustersetPeerUnresolved", `cluster "az9" is not in the clusterset`, 30*time.Second)
		t.Logf("from-az9: %s", msg)
		apply(c1, "az1", policy("y", "from-az2-z", sel("pod", "c"), from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": "z", annotation.ClusterLabel: "az2"}}})))
		msg = c1.waitEventWith("y", "from-az2-z", "ClustersetPeerUnresolved", `namespace "z" of cluster "az2" is not published`, 30*time.Second)
		t.Logf("from-az2-z: %s", msg)
		// A working policy changed to name az9: its last good spec (az2's x/a) stays programmed,
		// so the model keeps it too.
		np, err := c1.kc.NetworkingV1().NetworkPolicies("y").Get(context.Background(), "from-az2-xa", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		np.Spec.Ingress[0].From[0].NamespaceSelector = inCluster("x", "az9")
		if _, err := c1.kc.NetworkingV1().NetworkPolicies("y").Update(context.Background(), np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		msg = c1.waitEventWith("y", "from-az2-xa", "ClustersetPeerUnresolved", "last good spec stays programmed", 30*time.Second)
		t.Logf("from-az2-xa changed to az9: %s", msg)
		c1.waitMatrixIn(pods, byCluster)
	})

	t.Run("az2's certificate cannot publish a pod as az1's, nor change az1's rows", func(t *testing.T) {
		insert := `["OVN_ClusterSet",{"op":"insert","table":"Policy_Pod","row":{"cluster":"az1","namespace":"x","name":"forged","addresses":"10.16.0.250"}}]`
		out, err := ovsdbAs(cfg.NodeNS(2, 1), cfg.AZTLS(2), "ovsdb-client", "transact", cfg.ICSBEndpoint(), insert)
		if err == nil && !strings.Contains(out, "permission") || !strings.Contains(out, "Policy_Pod of cluster") {
			t.Errorf("az2's certificate inserting a Policy_Pod of az1: %v %s, want refused", err, out)
		}
		// c1 publishes nothing (no namespace of its is labelled): its rows are none to change.
		rows, err := exec.Command("ovsdb-client", "--timeout=10", "query", cfg.ICSBLocal(),
			`["OVN_ClusterSet",{"op":"select","table":"Policy_Pod","where":[["cluster","==","az1"]],"columns":["name"]}]`).CombinedOutput()
		if err != nil || strings.Contains(string(rows), "forged") {
			t.Errorf("az1's published pods: %v %s", err, rows)
		}
		t.Logf("az2's certificate refused: %s", out)
	})
	var out []string
	for _, ip := range pods[xa].ips {
		out = append(out, ip.IP)
	}
	return out
}

func podIndex(pods []probePod, cluster, ns, name string) int {
	for i, p := range pods {
		if p.cluster == cluster && p.ns == ns && p.name == name {
			return i
		}
	}
	panic("no pod " + cluster + ":" + ns + "/" + name)
}

type addressedPod struct {
	addrs []netip.Addr
	at    time.Time // when the IP object was first seen with them
}

func (a addressedPod) podIPs() []string {
	var out []string
	for _, ip := range a.addrs {
		out = append(out, ip.String())
	}
	return out
}

// waitIPObject waits for the pod's IP object (kovn's record of its addresses).
func (c *cluster) waitIPObject(ns, name string) addressedPod {
	c.t.Helper()
	var got addressedPod
	if err := pollEvery(50*time.Millisecond, 60*time.Second, func() error {
		out, err := c.kubectl("get", "ips.kovn.io", name+"."+ns, "-o", "jsonpath={.spec.v4IP} {.spec.v6IP}")
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		got = addressedPod{at: time.Now()}
		for _, f := range strings.Fields(out) {
			if a, err := netip.ParseAddr(f); err == nil {
				got.addrs = append(got.addrs, a)
			}
		}
		if len(got.addrs) == 0 {
			return fmt.Errorf("IP object %s.%s has no address yet", name, ns)
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return got
}

// waitPeerSets waits until every address of addrs is (in) or none is (!in) in the cluster's
// NetworkPolicy peer address sets, and returns when it saw that.
func (c *cluster) waitPeerSets(addrs []string, in bool) time.Time {
	c.t.Helper()
	var at time.Time
	if err := pollEvery(50*time.Millisecond, 30*time.Second, func() error {
		out, err := exec.Command("ovn-nbctl", "--db="+c.info.NBAddr, "--no-leader-only", "--timeout=10", "--bare", "--columns=addresses",
			"find", "Address_Set", `external_ids:"kovn.io/owner-type"=`+topology.OwnerPolicyPeer).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ovn-nbctl: %v %s", err, out)
		}
		have := map[string]bool{}
		for _, f := range strings.Fields(strings.NewReplacer(",", " ", `"`, " ").Replace(string(out))) {
			have[f] = true
		}
		for _, a := range addrs {
			if have[a] != in {
				return fmt.Errorf("%s in the peer address sets: %t, want %t", a, have[a], in)
			}
		}
		at = time.Now()
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return at
}

// pollEvery is eventually with a chosen interval, for waits whose moment is measured.
func pollEvery(every, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(every)
	}
}

// waitPeersCurrent waits for the InterConnect's ClustersetPeersCurrent condition to be status.
func (c *cluster) waitPeersCurrent(status string) {
	c.t.Helper()
	var out string
	if err := eventually(90*time.Second, func() error {
		out, _ = c.kubectl("get", "interconnect", "default", "-o",
			`jsonpath={.status.conditions[?(@.type=="ClustersetPeersCurrent")].status} {.status.conditions[?(@.type=="ClustersetPeersCurrent")].message}`)
		if !strings.HasPrefix(out, status) {
			return fmt.Errorf("ClustersetPeersCurrent %q, want %s", out, status)
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s: ClustersetPeersCurrent %s", c.info.Name, out)
}

// stayInPeerSets checks every 100 ms for d that every address of addrs stays in the cluster's
// NetworkPolicy peer address sets.
func (c *cluster) stayInPeerSets(addrs []string, d time.Duration) {
	c.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		out := c.nbctl("--bare", "--columns=addresses", "find", "Address_Set", `external_ids:"kovn.io/owner-type"=`+topology.OwnerPolicyPeer)
		have := map[string]bool{}
		for _, f := range strings.Fields(strings.NewReplacer(",", " ", `"`, " ").Replace(out)) {
			have[f] = true
		}
		for _, a := range addrs {
			if !have[a] {
				c.t.Fatalf("%s left c1's peer address sets while the store was away", a)
			}
		}
	}
}
