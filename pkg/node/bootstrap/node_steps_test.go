package bootstrap

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
)

// deleting is a Subnet whose deletion the controller's finalizer holds while pods use it.
func deleting(s *kovnv1.Subnet) *kovnv1.Subnet {
	now := metav1.Now()
	s.DeletionTimestamp, s.Finalizers = &now, []string{"kovn.io/subnet"}
	return s
}

func inVpc(s *kovnv1.Subnet, vpc string) *kovnv1.Subnet {
	s.Spec.Vpc = vpc
	return s
}

func TestDesiredCIDRsKeepsSubnetsBeingDeleted(t *testing.T) {
	valid := cond(kovnv1.ConditionValidated, true, "Valid")
	subnets := []kovnv1.Subnet{
		*subnet("ovn-default", "10.16.0.0/16", true, valid, cond(kovnv1.ConditionReady, true, "Reconciled")),
		*subnet("join", "100.64.0.0/16", false, valid, cond(kovnv1.ConditionReady, true, "Reconciled")),
		// Being deleted, pods still in it: the controller says Ready=False InUse, Validated stays True.
		*deleting(subnet("leaving", "10.200.0.0/24", true, valid, cond(kovnv1.ConditionReady, false, "InUse"))),
		// Valid but not (yet) programmed in OVN: Ready=False must not pull the route either.
		*subnet("unready", "10.201.0.0/24", false, valid, cond(kovnv1.ConditionReady, false, "Reconciling")),
		*subnet("invalid", "10.202.0.0/24", true, cond(kovnv1.ConditionValidated, false, "Overlap")),
		*subnet("new", "10.203.0.0/24", true), // no conditions yet
		// Another VPC, reusing the default subnet's CIDR: isolated from ovn0, never routed.
		*inVpc(subnet("blue", "10.16.0.0/24", true, valid, cond(kovnv1.ConditionReady, true, "Reconciled")), "blue"),
	}
	got := desiredCIDRs(subnets, "join")
	want := subnetCIDRs{
		routed: prefixes("10.16.0.0/16", "10.200.0.0/24", "10.201.0.0/24"),
		nat:    prefixes("10.16.0.0/16", "10.200.0.0/24"),
		all:    prefixes("10.16.0.0/16", "100.64.0.0/16", "10.200.0.0/24", "10.201.0.0/24"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("desiredCIDRs =\n%+v\nwant\n%+v", got, want)
	}
}

// fakeNode is a reconciler on the fake client whose side effects are recorded, one of them
// made to fail.
type fakeNode struct {
	r       *Reconciler
	events  *record.FakeRecorder
	called  map[string]int
	routed  []netip.Prefix
	failing map[string]error
	clock   *fakeClock
}

func newFakeNode(t *testing.T, objs ...client.Object) *fakeNode {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kovnv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Annotations: map[string]string{
		annotation.JoinIP: "100.64.0.2", annotation.JoinMAC: "0a:58:64:40:00:02",
		annotation.JoinCIDR: "100.64.0.0/16", annotation.JoinGateway: "100.64.0.1"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.1.11"}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, node)...).Build()
	f := &fakeNode{events: record.NewFakeRecorder(20), called: map[string]int{}, failing: map[string]error{},
		clock: &fakeClock{t: time.Unix(1000, 0)}}
	f.r = &Reconciler{Client: c, Cfg: Config{NodeName: "worker-1", JoinSubnet: "join", MTU: 1400}, Recorder: f.events}
	f.r.runner.Now = f.clock.now
	call := func(step string) error { f.called[step]++; return f.failing[step] }
	f.r.ops = &nodeOps{
		chassis: func(context.Context, ChassisIdentity) error { return call(StepChassisIdentity) },
		ovn0:    func(context.Context, JoinConfig) (netlink.Link, error) { return nil, call(StepOvn0) },
		routes: func(_ netlink.Link, cidrs []netip.Prefix, _ []netip.Addr) error {
			f.routed = cidrs
			return call(StepRoutes)
		},
		nat:        func(_, _ []netip.Prefix) error { return call(StepSNAT) },
		forwarding: func() error { return call(StepForwarding) },
		cniConfig:  func() error { return call(StepCNIConfig) },
	}
	return f
}

func (f *fakeNode) reconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (f *fakeNode) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestNodeReconcileFailingSNATStillWritesCNIConfig(t *testing.T) {
	f := newFakeNode(t, subnet("ovn-default", "10.16.0.0/16", true, cond(kovnv1.ConditionValidated, true, "Valid")))
	f.failing[StepSNAT] = errors.New("iptables-restore: exit status 2")
	res := f.reconcile(t)
	for _, s := range []string{StepChassisIdentity, StepOvn0, StepRoutes, StepForwarding, StepCNIConfig} {
		if f.called[s] != 1 {
			t.Errorf("step %s ran %d times, want 1 although snat failed", s, f.called[s])
		}
	}
	if !f.r.Ready() {
		t.Error("node not Ready (no CNI config) because of a SNAT failure")
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("requeue after %s, want the snat retry in 1s", res.RequeueAfter)
	}
	evs := f.drainEvents()
	if len(evs) != 1 || !strings.Contains(evs[0], "Warning "+ReasonStepFailed) || !strings.Contains(evs[0], "snat") ||
		!strings.Contains(evs[0], "iptables-restore") || !strings.Contains(evs[0], "nothing else waits") {
		t.Fatalf("events = %q, want one warning naming the snat step and its error", evs)
	}
	var n corev1.Node
	if err := f.r.Get(context.Background(), client.ObjectKey{Name: "worker-1"}, &n); err != nil || n.Annotations[annotation.Chassis] != "worker-1" {
		t.Errorf("chassis annotation not patched although independent of snat: %v %v", n.Annotations, err)
	}

	delete(f.failing, StepSNAT) // the retry succeeds: recovery reported
	f.reconcile(t)
	if evs := f.drainEvents(); len(evs) != 0 || f.called[StepSNAT] != 1 {
		t.Fatalf("snat retried before its backoff ran out: %d runs, events %q", f.called[StepSNAT], evs)
	}
	f.clock.add(time.Second)
	f.reconcile(t)
	if evs := f.drainEvents(); len(evs) != 1 || !strings.Contains(evs[0], "Normal "+ReasonStepRecovered+" kovn step snat") {
		t.Fatalf("events after recovery = %q", evs)
	}
}

func TestNodeReconcileFailingRoutesWithholdCNIConfig(t *testing.T) {
	f := newFakeNode(t, deleting(subnet("leaving", "10.200.0.0/24", false,
		cond(kovnv1.ConditionValidated, true, "Valid"), cond(kovnv1.ConditionReady, false, "InUse"))))
	f.failing[StepRoutes] = errors.New("route 10.200.0.0/24: network unreachable")
	f.reconcile(t)
	if f.called[StepCNIConfig] != 0 || f.r.Ready() {
		t.Fatal("CNI config written without routes: kubelet probes could not reach the pods")
	}
	if f.called[StepSNAT] != 1 || f.called[StepForwarding] != 1 {
		t.Errorf("independent steps did not run: %v", f.called)
	}
	if !reflect.DeepEqual(f.routed, prefixes("10.200.0.0/24")) {
		t.Errorf("routes asked for %v, want the subnet being deleted kept", f.routed)
	}
	if evs := f.drainEvents(); len(evs) != 1 || !strings.Contains(evs[0], "withheld until it succeeds: cni-config") {
		t.Fatalf("events = %q, want the routes failure saying it withholds cni-config", evs)
	}
}

func TestNodeReconcileWaitsQuietlyForJoinAddress(t *testing.T) {
	f := newFakeNode(t)
	var n corev1.Node
	_ = f.r.Get(context.Background(), client.ObjectKey{Name: "worker-1"}, &n)
	n.Annotations = nil
	if err := f.r.Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	res := f.reconcile(t)
	if f.called[StepOvn0] != 0 || f.called[StepCNIConfig] != 0 || f.called[StepSNAT] != 1 || f.called[StepChassisIdentity] != 1 {
		t.Errorf("calls = %v: want chassis and snat done, ovn0 waiting, no CNI config", f.called)
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("requeue after %s, want 1s while waiting for the controller", res.RequeueAfter)
	}
	if evs := f.drainEvents(); len(evs) != 0 {
		t.Errorf("waiting for the controller produced events: %q", evs)
	}
}
