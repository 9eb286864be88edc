package cluster

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

// The Services benchmark reads kovn_nb_transactions_total{owner_type="Service"}: one
// transaction per reconcile that changed NB, none for an unchanged Service.
func TestServiceTransactionsCounted(t *testing.T) {
	port, ready := int32(8080), true
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.10"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports:     []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.16.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}
	e := newReconcilerEnv(t, svc, slice)
	r := &ServiceReconciler{Client: e.c, NB: e.nb}
	counter := nbTransactions.WithLabelValues(topology.OwnerService)
	before := testutil.ToFloat64(counter)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
	for i := 0; i < 2; i++ {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Fatalf("Service transactions: got %v, want 1 (the second reconcile changes nothing)", got)
	}
	if testutil.ToFloat64(nbOperations.WithLabelValues(topology.OwnerService)) == 0 {
		t.Fatal("no Service operations counted")
	}
}

func ptrTo[T any](v T) *T { return &v }
