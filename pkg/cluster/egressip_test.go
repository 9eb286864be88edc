package cluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// An EgressIP selects the running pods of the namespaces its selector matches, narrowed by
// its pod selector, with the addresses of their IP objects: never a host-network pod, one in
// another namespace, or one with a FloatingIP of its own. A selector that does not parse, or a
// Subnet that is no external network, is reported and programs nothing.
func TestEgressIPSelection(t *testing.T) {
	o := DefaultOptions()
	ns := func(name string, l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	pod := func(ns, name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	hostNet := pod("sel", "host", "web")
	hostNet.Spec.HostNetwork = true
	pods := []*corev1.Pod{pod("sel", "web1", "web"), pod("sel", "web2", "web"), pod("sel", "db", "db"),
		pod("other", "web3", "web"), pod("sel", "floating", "web"), hostNet}
	objs := []client.Object{subnetAt(o.DefaultSubnet, o.DefaultSubnetCIDR, created0), subnetAt(o.JoinSubnet, o.JoinCIDR, created0),
		subnetAt("plain", "10.17.0.0/24", created0),
		ns("sel", map[string]string{"egress": "yes"}), ns("other", nil),
		&kovnv1.FloatingIP{ObjectMeta: metav1.ObjectMeta{Name: "f"}, Spec: kovnv1.FloatingIPSpec{Subnet: "ext",
			Pod: kovnv1.FloatingIPPod{Namespace: "sel", Name: "floating"}}}}
	for _, p := range pods {
		objs = append(objs, p)
	}
	e := newReconcilerEnv(t, objs...)
	for _, s := range []string{o.DefaultSubnet, o.JoinSubnet, "plain"} {
		e.reconcileSubnet(t, s)
	}
	ctx := context.Background()
	want := map[string]string{} // selected pod -> its address
	for _, p := range pods {
		if _, err := e.pods.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatalf("reconcile pod %s: %v", p.Name, err)
		}
		var ip kovnv1.IP
		if err := e.c.Get(ctx, types.NamespacedName{Name: IPObjectName(p.Namespace, p.Name)}, &ip); err == nil && (p.Name == "web1" || p.Name == "web2") {
			want[p.Name] = ip.Spec.V4IP
		}
	}
	r := &EgressIPReconciler{Client: e.c, State: e.st, NB: e.nb}
	spec := kovnv1.EgressIPSpec{Subnet: "plain", NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"egress": "yes"}},
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	nsSel, podSel, err := egressSelectors(&spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.selectedPods(ctx, nsSel, podSel, o.DefaultVpc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
		if len(p.IPs) != 1 || p.IPs[0].String() != want[p.Name] {
			t.Errorf("pod %s selected with %v, want its IP object's %s", p.Name, p.IPs, want[p.Name])
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"web1", "web2"}) {
		t.Errorf("selected %v, want web1 and web2", names)
	}
	// Another VPC's router never sees these pods: none selected there.
	if got, _ := r.selectedPods(ctx, nsSel, podSel, "elsewhere"); len(got) != 0 {
		t.Errorf("pods selected for another VPC: %+v", got)
	}

	for _, tc := range []struct {
		name   string
		spec   kovnv1.EgressIPSpec
		reason string
	}{
		{"notexternal", spec, kovnv1.ReasonNotExternal},
		{"nosubnet", kovnv1.EgressIPSpec{Subnet: "nope", NamespaceSelector: spec.NamespaceSelector}, kovnv1.ReasonSubnetNotFound},
	} {
		eip := &kovnv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Generation: 1}, Spec: tc.spec}
		if err := e.c.Create(ctx, eip); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: tc.name}}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := e.c.Get(ctx, types.NamespacedName{Name: tc.name}, eip); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(eip.Status.Conditions, kovnv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
			t.Errorf("%s: Ready %+v, want False %s", tc.name, c, tc.reason)
		}
		if _, held := e.st.IPAM.Lookup(eipOwner(tc.name)); held || len(eip.Status.Addresses) != 0 {
			t.Errorf("%s holds addresses: %+v", tc.name, eip.Status.Addresses)
		}
	}
	bad := spec
	bad.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Sometimes"}}}
	if _, _, err := egressSelectors(&bad); err == nil {
		t.Error("a selector with operator Sometimes parsed")
	}
}

// A pod, its IP object or a namespace queues only the EgressIPs that select it; one whose
// selector does not parse is always queued (its condition says why).
func TestEgressIPRequests(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kovnv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	eip := func(name string, nsLabels, podLabels map[string]string) *kovnv1.EgressIP {
		e := &kovnv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kovnv1.EgressIPSpec{NamespaceSelector: metav1.LabelSelector{MatchLabels: nsLabels}}}
		if podLabels != nil {
			e.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: podLabels}
		}
		return e
	}
	bad := eip("bad", nil, nil)
	bad.Spec.NamespaceSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sideways"}}
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "sel", Name: "web", Labels: map[string]string{"app": "web"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sel", Labels: map[string]string{"egress": "yes"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		eip("whole-ns", map[string]string{"egress": "yes"}, nil),
		eip("web-only", map[string]string{"egress": "yes"}, map[string]string{"app": "web"}),
		eip("elsewhere", map[string]string{"egress": "other"}, nil), bad, web).Build()
	r := &EgressIPReconciler{Client: c}
	ctx := context.Background()
	names := func(reqs []reconcile.Request) []string {
		var out []string
		for _, q := range reqs {
			out = append(out, q.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		what string
		got  []reconcile.Request
		want []string
	}{
		{"web pod", r.podRequests(ctx, web), []string{"bad", "web-only", "whole-ns"}},
		{"db pod", r.podRequests(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "sel", Name: "db",
			Labels: map[string]string{"app": "db"}}}), []string{"bad", "whole-ns"}},
		{"pod of an unselected namespace", r.podRequests(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x",
			Labels: map[string]string{"app": "web"}}}), []string{"bad"}},
		{"web's IP object", r.ipRequests(ctx, &kovnv1.IP{Spec: kovnv1.IPSpec{Namespace: "sel", PodName: "web"}}),
			[]string{"bad", "web-only", "whole-ns"}},
		{"a node's IP object", r.ipRequests(ctx, &kovnv1.IP{Spec: kovnv1.IPSpec{NodeName: "n1"}}), nil},
		{"namespace other=yes", r.namespaceRequests(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n",
			Labels: map[string]string{"egress": "other"}}}), []string{"bad", "elsewhere"}},
	} {
		if got := names(tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s queues %v, want %v", tc.what, got, tc.want)
		}
	}
}
