package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// An external address inside a Subnet would let a Service capture a pod's traffic: it is
// dropped with a reason; ClusterIPs and addresses outside the cluster stay.
func TestRefuseInClusterVIPs(t *testing.T) {
	st := NewState(DefaultOptions())
	st.setSubnet(topology.SubnetIn{Name: "ovn-default", Switch: "ovn-default", CIDRs: testPrefixes("10.16.0.0/16", "fd00:10:16::/64")})
	r := &ServiceReconciler{State: st}
	vips := testAddrs("10.96.0.10", "fd00:10:96::a", "198.51.100.10", "10.16.0.5", "fd00:10:16::5")
	kept, why := r.refuseInClusterVIPs(vips, 2)
	if want := testAddrs("10.96.0.10", "fd00:10:96::a", "198.51.100.10"); !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if len(why) != 2 || !strings.Contains(why[0], "10.16.0.5 refused: it is inside subnet ovn-default (10.16.0.0/16)") {
		t.Errorf("reasons = %q", why)
	}
	// A ClusterIP is never refused, even if it looked like a pod address.
	if kept, why := r.refuseInClusterVIPs(testAddrs("10.16.0.9"), 1); len(kept) != 1 || len(why) != 0 {
		t.Errorf("ClusterIP only: kept %v, reasons %v", kept, why)
	}
}

// A new leader programs no Service before it restored the subnets: the external addresses it
// must refuse depend on them.
func TestServiceWaitsForRestore(t *testing.T) {
	e := newReconcilerEnv(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "thief"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.11"}, ExternalIPs: []string{"10.16.0.5"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
	st := NewState(DefaultOptions()) // not restored yet
	r := &ServiceReconciler{Client: e.c, NB: e.nb, State: st}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "thief"}}
	if _, err := r.Reconcile(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reconcile before the restore: %v, want it to wait", err)
	}
	var lbs []nb.LoadBalancer
	if err := e.nb.List(context.Background(), &lbs); err != nil || len(lbs) != 0 {
		t.Fatalf("load balancers written before the restore: %+v %v", lbs, err)
	}
}

// A Service labelled for another service proxy, or headless by label, is left to it: its load
// balancers go; without the label they come back (kube-proxy reads the labels the same way).
func TestServiceLabelledForAnotherProxy(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.12"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	e := newReconcilerEnv(t, svc)
	st := NewState(DefaultOptions())
	st.MarkRestored()
	r := &ServiceReconciler{Client: e.c, NB: e.nb, State: st}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}
	count := func() int {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		var lbs []nb.LoadBalancer
		if err := e.nb.List(context.Background(), &lbs); err != nil {
			t.Fatal(err)
		}
		return len(lbs)
	}
	if n := count(); n == 0 {
		t.Fatal("no load balancer for an ordinary Service")
	}
	for _, label := range []string{"service.kubernetes.io/service-proxy-name", "service.kubernetes.io/headless"} {
		svc.Labels = map[string]string{label: ""}
		if err := e.c.Update(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 0 {
			t.Errorf("labelled %s: %d load balancers, want none", label, n)
		}
		svc.Labels = nil
		if err := e.c.Update(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		if n := count(); n == 0 {
			t.Errorf("label %s removed: no load balancer", label)
		}
	}
}

// spec.externalIPs get a load balancer VIP only inside the admin's ranges; one outside them
// (the control plane's address, say) gets a ServicePartlyProgrammed event and no VIP, while
// the ClusterIP stays programmed.
func TestExternalIPsOnlyFromAdminRanges(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "grab"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.20"}, ExternalIPs: []string{"198.51.100.10", "172.30.0.2"},
			Ports: []corev1.ServicePort{{Name: "sb", Port: 6642}}}}
	e := newReconcilerEnv(t, svc)
	st := NewState(DefaultOptions())
	st.MarkRestored()
	r := &ServiceReconciler{Client: e.c, NB: e.nb, State: st, Recorder: e.rec, ExternalIPCIDRs: testPrefixes("198.51.100.0/24")}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "t1", Name: "grab"}}); err != nil {
		t.Fatal(err)
	}
	var lbs []nb.LoadBalancer
	if err := e.nb.List(context.Background(), &lbs); err != nil {
		t.Fatal(err)
	}
	vips := map[string]bool{}
	for _, lb := range lbs {
		for v := range lb.Vips {
			vips[v] = true
		}
	}
	if !vips["10.96.0.20:6642"] || !vips["198.51.100.10:6642"] || vips["172.30.0.2:6642"] {
		t.Errorf("VIPs %v, want the ClusterIP and 198.51.100.10, not 172.30.0.2", vips)
	}
	if evs := strings.Join(e.events(), "\n"); !strings.Contains(evs, "172.30.0.2 refused: it is outside the allowed ranges") {
		t.Errorf("events %q", evs)
	}
}

// A node's new address may be one a Service names as an external IP: such Services (and the
// internalTrafficPolicy=Local ones, whose backends are per node) are looked at again when a
// node's addresses change; heartbeats pass nothing.
func TestNodeChangesConcernSomeServices(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	svcs := []corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "plain"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "ext"}, Spec: corev1.ServiceSpec{ExternalIPs: []string{"198.51.100.7"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "local"}, Spec: corev1.ServiceSpec{InternalTrafficPolicy: &local}},
	}
	got := servicesNodesConcern(svcs)
	if len(got) != 2 || got[0].Name != "ext" || got[1].Name != "local" {
		t.Errorf("Services a node change concerns: %v, want a/ext and a/local", got)
	}
	node := func(addr string, beat int64) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.Unix(beat, 0)}}}}
	}
	if nodeAddressesChanged(event.UpdateEvent{ObjectOld: node("172.30.1.11", 1), ObjectNew: node("172.30.1.11", 2)}) {
		t.Error("a heartbeat passed")
	}
	if !nodeAddressesChanged(event.UpdateEvent{ObjectOld: node("172.30.1.11", 1), ObjectNew: node("198.51.100.7", 1)}) {
		t.Error("a new node address did not pass")
	}
}
