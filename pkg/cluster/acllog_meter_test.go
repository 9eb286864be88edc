package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// A namespace's ACL log meter lives as long as the namespace has a NetworkPolicy: the first
// logging policy makes it, deleting one of two keeps it, deleting the last removes it.
func TestNamespaceLogMeterGoesWithTheLastPolicy(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acl", Annotations: map[string]string{annotation.ACLLogging: `{"deny": "alert"}`}}}
	policy := func(name string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "acl", Name: name},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	}
	e := defaultEnv(t, ns, policy("one"), policy("two"))
	np := &NetworkPolicyReconciler{Client: e.c, State: e.st, NB: e.nb, Recorder: e.rec}
	meter := func() bool {
		t.Helper()
		var meters []nb.Meter
		if err := e.nb.List(context.Background(), &meters); err != nil {
			t.Fatal(err)
		}
		for _, m := range meters {
			if m.Name == topology.NamespaceLogMeter("acl") {
				return true
			}
		}
		return false
	}
	e.reconcile(t, np, "acl", "one")
	e.reconcile(t, np, "acl", "two")
	if !meter() {
		t.Fatal("no meter for namespace acl's logging policies")
	}
	for i, name := range []string{"one", "two"} {
		if err := e.c.Delete(context.Background(), policy(name)); err != nil {
			t.Fatal(err)
		}
		e.reconcile(t, np, "acl", name)
		if want := i == 0; meter() != want {
			t.Errorf("after deleting policy %s: meter there %t, want %t", name, meter(), want)
		}
	}
}
