package mcs

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
