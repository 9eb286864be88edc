package cluster

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1 "github.com/kovn/kovn/api/policy/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// fakePeers is a clusterset of az1 (this cluster), az2 publishing namespace x (pods a and b)
// and az3 publishing nothing.
type fakePeers struct{ local string }

func (p fakePeers) Local() string      { return p.local }
func (p fakePeers) Ready() bool        { return true }
func (p fakePeers) Clusters() []string { return []string{"az1", "az2", "az3"} }
func (p fakePeers) Namespaces() []RemoteNamespace {
	return []RemoteNamespace{{Cluster: "az2", AZ: "az2", Name: "x", Labels: map[string]string{corev1.LabelMetadataName: "x", "ns": "x"}},
		// az1's own rows come back from the store too: they are never remote.
		{Cluster: "az1", AZ: "az1", Name: "x", Labels: map[string]string{corev1.LabelMetadataName: "x", "ns": "x"}}}
}
func (p fakePeers) Pods(cluster, namespace string) []RemotePod {
	switch cluster + "/" + namespace {
	case "az2/x":
		return []RemotePod{{Name: "a", Labels: map[string]string{"pod": "a"}, IPs: testAddrs("10.17.0.5", "fd00:17::5")},
			// b claims an address az2 does not advertise and one of this cluster's pods: neither counts.
			{Name: "b", Labels: map[string]string{"pod": "b"}, IPs: testAddrs("10.17.0.6", "10.18.0.6", "10.16.0.5")}}
	case "az1/x":
		return []RemotePod{{Name: "a", Labels: map[string]string{"pod": "a"}, IPs: testAddrs("10.99.0.9")}}
	}
	return nil
}
func (p fakePeers) Subscribe(func(string)) {}

func peersTestClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kovnv1.AddToScheme(scheme)
	var objs []client.Object
	for _, ns := range []string{"x", "y"} {
		// y claims to be az2's: a namespace's own labels never say which cluster it is in.
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{corev1.LabelMetadataName: ns, "ns": ns, annotation.ClusterLabel: "az2"}}})
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Labels: map[string]string{"pod": "a"}}},
			&kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: IPObjectName(ns, "a")},
				Spec: kovnv1.IPSpec{PodName: "a", Namespace: ns, Subnet: "ovn-default", V4IP: map[string]string{"x": "10.16.0.5", "y": "10.16.0.6"}[ns]}})
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

// testTrust: az2 advertises 10.17.0.0/16, fd00:17::/64 and (wrongly) 10.16.0.0/16, this
// cluster's pod CIDR; az1 (this cluster) 10.99.0.0/16.
var testTrust = remoteTrust{
	advertised: map[string][]netip.Prefix{"az2": testPrefixes("10.17.0.0/16", "fd00:17::/64", "10.16.0.0/16"), "az1": testPrefixes("10.99.0.0/16")},
	local:      testPrefixes("10.16.0.0/16", "100.64.0.0/16"),
}

func TestPodsInClusterset(t *testing.T) {
	c := peersTestClient(t)
	for _, tc := range []struct {
		name    string
		ns, pod *metav1.LabelSelector
		local   string
		want    []string
	}{
		{name: "namespace x of every cluster", ns: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: annotation.ClusterLabel, Operator: metav1.LabelSelectorOpExists}}},
			want: []string{"10.16.0.5", "10.17.0.5", "10.17.0.6", "fd00:17::5"}},
		{name: "x/a of az2 only: the local x/a and the store's own rows stay out", ns: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x", annotation.ClusterLabel: "az2"}},
			pod: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}, want: []string{"10.17.0.5", "fd00:17::5"}},
		{name: "this cluster by its id: a namespace labelled az2 is still this cluster's", ns: &metav1.LabelSelector{MatchLabels: map[string]string{annotation.ClusterLabel: "az1"}},
			want: []string{"10.16.0.5", "10.16.0.6"}},
		{name: "every cluster but this one", ns: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: annotation.ClusterLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"az1"}}}},
			want: []string{"10.17.0.5", "10.17.0.6", "fd00:17::5"}},
		{name: "in no clusterset: the label names no cluster at all", local: "-", ns: &metav1.LabelSelector{MatchLabels: map[string]string{annotation.ClusterLabel: "az2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nsSel, _ := metav1.LabelSelectorAsSelector(tc.ns)
			podSel, _ := metav1.LabelSelectorAsSelector(tc.pod)
			if tc.pod == nil {
				podSel, _ = metav1.LabelSelectorAsSelector(&metav1.LabelSelector{})
			}
			local := "az1"
			if tc.local == "-" {
				local = ""
			}
			pods, err := podsInClusterset(context.Background(), c, fakePeers{local: local}, testTrust, nsSel, podSel, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				for _, a := range p.IPs {
					got = append(got, a.String())
				}
			}
			slices.SortFunc(got, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a policy's own pods are never remote", func(t *testing.T) {
		nsSel, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: annotation.ClusterLabel, Operator: metav1.LabelSelectorOpExists}}})
		podSel, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{})
		pods, err := podsInClusterset(context.Background(), c, fakePeers{local: "az1"}, testTrust, nsSel, podSel, true)
		if err != nil || len(pods) != 1 || pods[0].Port != "a.x" {
			t.Errorf("subject pods %+v (%v), want x/a of this cluster only", pods, err)
		}
	})
}

func TestClustersetWide(t *testing.T) {
	np := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: annotation.ClusterLabel, Operator: metav1.LabelSelectorOpExists}}}},
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{annotation.ClusterLabel: "az2"}}}, // a pod label: local
	}}}}}
	if got := clustersetSelectors(np); len(got) != 1 || got[0] != np.Spec.Ingress[0].From[1].NamespaceSelector {
		t.Errorf("clusterset-wide selectors %v, want the second peer's only", got)
	}
}

func TestClustersetPeerWarnings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sel   map[string]string
		local string
		want  []string // parts of the warnings, in order
	}{
		{name: "a cluster not in the set", sel: map[string]string{annotation.ClusterLabel: "az9"}, local: "az1", want: []string{`cluster "az9" is not in the clusterset`}},
		{name: "a namespace az2 does not publish", sel: map[string]string{annotation.ClusterLabel: "az2", corev1.LabelMetadataName: "y"}, local: "az1",
			want: []string{`namespace "y" of cluster "az2" is not published`}},
		{name: "published", sel: map[string]string{annotation.ClusterLabel: "az2", corev1.LabelMetadataName: "x"}, local: "az1"},
		{name: "no clusterset", sel: map[string]string{annotation.ClusterLabel: "az2"}, want: []string{"in no clusterset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clustersetPeerWarnings(&metav1.LabelSelector{MatchLabels: tc.sel}, fakePeers{local: tc.local})
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q, want it to say %q", got[i], w)
				}
			}
		})
	}
	all := clustersetPeerWarnings(&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "y"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: annotation.ClusterLabel, Operator: metav1.LabelSelectorOpExists}}}, fakePeers{local: "az1"})
	// This cluster's own y is not asked for: it is not published to itself.
	if len(all) != 2 || !strings.Contains(all[0], `"az2"`) || !strings.Contains(all[1], `"az3"`) {
		t.Errorf("y of every cluster: warnings %q, want az2's and az3's y unpublished", all)
	}
}

// TestHeldSpec: a spec changed to name a cluster not in the set keeps its last good spec; a new
// policy naming one is programmed as it is (the peer selects nothing); a spec unchanged whose
// peer the other cluster withdrew follows the withdrawal; a deleted and recreated policy
// (another UID) starts afresh.
func TestHeldSpec(t *testing.T) {
	r := &NetworkPolicyReconciler{Peers: fakePeers{local: "az1"}}
	from := func(cluster string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "p", UID: "u1"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "x", annotation.ClusterLabel: cluster}}}}}}}}
	}
	cluster := func(np *networkingv1.NetworkPolicy) string {
		return np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[annotation.ClusterLabel]
	}
	if got := cluster(r.heldSpec(from("az9"))); got != "az9" {
		t.Errorf("a new policy naming az9: programmed for %s, want as written", got)
	}
	if got := cluster(r.heldSpec(from("az2"))); got != "az2" {
		t.Errorf("fixed to az2: programmed for %s", got)
	}
	if got := cluster(r.heldSpec(from("az9"))); got != "az2" {
		t.Errorf("changed to az9: programmed for %s, want the last good az2", got)
	}
	// az2 stops publishing x: the unchanged spec follows (its peer selects nothing there).
	withdrawn := &NetworkPolicyReconciler{Peers: fakePeers{local: "az1"}, lastGood: r.lastGood}
	np := from("az3") // az3 publishes nothing: as if az2 withdrew x after az3's spec was good
	withdrawn.lastGood["y/p"] = goodSpec{uid: "u1", spec: *np.Spec.DeepCopy()}
	if got := cluster(withdrawn.heldSpec(np)); got != "az3" {
		t.Errorf("unchanged spec, peer withdrawn: programmed for %s, want az3 as written", got)
	}
	again := from("az9")
	again.UID = "u2"
	if got := cluster(r.heldSpec(again)); got != "az9" {
		t.Errorf("a recreated policy naming az9: programmed for %s, want as written", got)
	}
}

// TestClustersetDenyRefused: a Deny or Pass rule of a ClusterNetworkPolicy may not select
// other clusters' pods by labels (a cluster could leave it by not publishing them); Accept may.
func TestClustersetDenyRefused(t *testing.T) {
	r := &ClusterNetworkPolicyReconciler{}
	wide := &metav1.LabelSelector{MatchLabels: map[string]string{annotation.ClusterLabel: "az2"}}
	for _, tc := range []struct {
		action string
		ns     *metav1.LabelSelector
		pods   *policyv1.NamespacedPod
	}{
		{"Deny", wide, nil}, {"Pass", wide, nil}, {"Deny", nil, &policyv1.NamespacedPod{NamespaceSelector: *wide}},
	} {
		err := r.addPodPeer(context.Background(), &topology.ClusterRuleIn{Action: tc.action}, tc.ns, tc.pods)
		var invalid *cnpInvalid
		if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "cannot select pods of other clusters") {
			t.Errorf("%s with a clusterset-wide peer: %v, want refused as invalid", tc.action, err)
		}
	}
}

// TestHeldSpecFollowsWithdrawal: when the last good spec meets the same warnings (the other
// cluster withdrew what it names), an edit made meanwhile is programmed, not held.
func TestHeldSpecFollowsWithdrawal(t *testing.T) {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "p", UID: "u1"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "y", annotation.ClusterLabel: "az2"}}}}}}}}
	r := &NetworkPolicyReconciler{Peers: fakePeers{local: "az1"}, lastGood: map[string]goodSpec{"y/p": {uid: "u1", spec: *np.Spec.DeepCopy()}}}
	tightened := np.DeepCopy()
	tightened.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}
	if got := r.heldSpec(tightened); got.Spec.PodSelector.MatchLabels["pod"] != "a" {
		t.Errorf("an edit while az2 does not publish y (as when the last good spec was written): held %+v, want the edit", got.Spec)
	}
}
