package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	mnpv1 "github.com/kovn/kovn/api/mnp/v1beta1"
	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/netattach"
)

// mnpTestClient: pods a and b in namespace attach, each with eth0's IP object and one on
// attach/blue (kovn) as net1; b also on attach/mv (macvlan, delegated) as net2.
func mnpTestClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kovnv1.AddToScheme, nadv1.AddToScheme, mnpv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	ip := func(pod, iface, network, addr string, delegated bool) *kovnv1.IP {
		name := IPObjectName("attach", pod)
		if iface != "" {
			name = AttachmentIPName("attach", pod, iface)
		}
		return &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kovnv1.IPSpec{PodName: pod, Namespace: "attach",
			Interface: iface, Network: network, Delegated: delegated, V4IP: addr}}
	}
	objs := []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "attach", Name: "a", Labels: map[string]string{"pod": "a"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "attach", Name: "b", Labels: map[string]string{"pod": "b"}}},
		ip("a", "", "", "10.16.0.10", false), ip("a", "net1", "attach/blue", "10.215.0.10", false),
		ip("b", "", "", "10.16.0.11", false), ip("b", "net1", "attach/blue", "10.215.0.11", false),
		ip("b", "net2", "attach/mv", "10.216.0.11", true),
		&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "attach", Name: "blue"},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion": "1.0.0", "name": "blue", "type": "kovn"}`}},
		&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "attach", Name: "mv"},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion": "1.0.0", "name": "mv", "type": "macvlan", "master": "eth1", "ipam": {"type": "kovn"}}`}},
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithIndex(&kovnv1.IP{}, ipPodKey, ipPodIndex).Build()
}

// TestMultiNetworkPolicyIn: the policy's pods are their net1 ports, its peers their net1
// addresses (never eth0's, never a delegated network's); its port group and ownership are not a
// NetworkPolicy's of the same name; a network kovn does not plumb, a missing definition and a
// missing annotation are refused.
func TestMultiNetworkPolicyIn(t *testing.T) {
	c := mnpTestClient(t)
	r := &MultiNetworkPolicyReconciler{Client: c, State: NewState(DefaultOptions()), Delegates: netattach.AllowingHostInterfaces("eth1")}
	ctx := context.Background()
	mnp := &mnpv1.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "attach", Name: "b-from-a",
		Annotations: map[string]string{mnpv1.PolicyForAnnotation: "blue"}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}}}}}}}
	nets, err := r.networks(ctx, mnp)
	if err != nil || strings.Join(nets, ",") != "attach/blue" {
		t.Fatalf("networks %v, %v", nets, err)
	}
	in, err := r.policyIn(ctx, mnp, nets)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Pods) != 1 || in.Pods[0].Port != "b.attach.net1" || in.Pods[0].IPs[0].String() != "10.215.0.11" {
		t.Errorf("policy pods %+v, want b's net1 port", in.Pods)
	}
	peers := in.IngressRules[0].Peers
	if len(peers) != 1 || len(peers[0].Pods) != 1 || peers[0].Pods[0].IPs[0].String() != "10.215.0.10" ||
		!strings.HasPrefix(peers[0].Selector, "networks=attach/blue;") {
		t.Errorf("peers %+v, want a's net1 address under a selector naming the network", peers)
	}
	sh := topology.ForNetworkPolicy(in)
	if sh.OwnerType != topology.OwnerMultiNetworkPolicy || len(sh.PortGroups) != 1 || !strings.HasPrefix(sh.PortGroups[0].Name, "kovn_mnp_") {
		t.Errorf("shard %s, port groups %+v: want a MultiNetworkPolicy's own", sh.OwnerType, sh.PortGroups)
	}

	all, err := attachedPods(ctx, c, nil, labels.Everything(), []string{"attach/blue", "attach/mv"}, false)
	if err != nil || len(all) != 2 {
		t.Errorf("attached pods on blue and mv: %+v (%v), want a's and b's net1 only (mv is delegated)", all, err)
	}
	for value, want := range map[string]string{"mv": "not as an OVN port", "red": "NetworkAttachmentDefinition", "": "no k8s.v1.cni.cncf.io/policy-for"} {
		mnp.Annotations[mnpv1.PolicyForAnnotation] = value
		if _, err := r.networks(ctx, mnp); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("policy-for %q: %v, want an error saying %q", value, err, want)
		}
	}
}
