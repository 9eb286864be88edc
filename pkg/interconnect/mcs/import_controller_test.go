package mcs

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A new leader's import reconciler can run before its membership reconciler has looked at the
// InterConnect: the imports stay until membership is decided, and go once it says "no
// clusterset". (CI saw a new leader delete and recreate an import: new uid, new ClusterIP.)
func TestImportsStayUntilMembershipIsDecided(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mcsv1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	si := &mcsv1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs", Name: "web"},
		Spec: mcsv1.ServiceImportSpec{Type: mcsv1.ClusterSetIP, IPs: []string{"10.96.0.9"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(si,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcs"}}).Build()
	set := NewClusterset(nil)
	r := &ImportReconciler{Client: c, Set: set}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "mcs", Name: "web"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(si), &mcsv1.ServiceImport{}); err != nil {
		t.Fatalf("import reconciled before membership was decided: %v (want it kept)", err)
	}
	if _, err := set.set(ctx, "", nil); err != nil { // no InterConnect: not a member
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(si), &mcsv1.ServiceImport{}); err == nil {
		t.Fatal("import kept once membership said no clusterset, want it removed")
	}
}

// When local-first moves port http from c1's imported slice to c2's, c2's slice gains it
// before c1's loses it: the load balancer never has a moment without a backend for it.
func TestSyncSlicesGivesAPortBeforeTakingOne(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mcsv1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	im := Import{Namespace: "mcs", Name: "web", Locality: LocalityLocalFirst, Clusters: []string{"c1", "c2"},
		Serves: map[string]map[string]bool{"c1": {"http/TCP": true}, "c2": {"http/TCP": true}}}
	target := []Port{{Name: "http", Protocol: "TCP", Port: 8080}}
	slice := func(cluster string, ready bool) Slice {
		return Slice{Cluster: cluster, Name: "web-1", AddressType: "IPv4", Ports: target,
			Endpoints: []Endpoint{{Addresses: []string{"10.0.0.1"}, Ready: ready, Serving: ready}}}
	}
	si := &mcsv1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs", Name: "web", UID: "u1"}}
	var objs []client.Object
	for _, es := range ImportedSlices(im, []Slice{slice("c1", true), slice("c2", true)}, "c1") {
		objs = append(objs, es) // c1's slice serves http, c2's none
	}
	var order []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, si)...).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			order = append(order, obj.GetLabels()[mcsv1.LabelSourceCluster])
			return c.Update(ctx, obj, opts...)
		}}).Build()
	r := &ImportReconciler{Client: c}
	// c1's endpoint no longer ready: http goes to c2. Write the desired slices in the order
	// that would leave http without a backend first (c1's before c2's).
	want := ImportedSlices(im, []Slice{slice("c1", false), slice("c2", true)}, "c1")
	slices.SortFunc(want, func(a, b *discoveryv1.EndpointSlice) int {
		return strings.Compare(a.Labels[mcsv1.LabelSourceCluster], b.Labels[mcsv1.LabelSourceCluster])
	})
	if err := r.syncSlices(context.Background(), im, si, want); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"c2", "c1"}) {
		t.Fatalf("slices updated in order %v, want c2's (gaining http) before c1's (losing it)", order)
	}
}
