package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

func (e *reconcilerEnv) reconcile(t *testing.T, r interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}, ns, name string) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}); err != nil {
		t.Fatalf("reconcile %s/%s: %v", ns, name, err)
	}
}

// lsp returns the named switch port from the NB cache, if any.
func (e *reconcilerEnv) lsp(name string) *nb.LogicalSwitchPort {
	var ports []nb.LogicalSwitchPort
	_ = e.nb.List(context.Background(), &ports)
	for i := range ports {
		if ports[i].Name == name {
			return &ports[i]
		}
	}
	return nil
}

func defaultEnv(t *testing.T, objs ...client.Object) *reconcilerEnv {
	t.Helper()
	o := DefaultOptions()
	objs = append(objs, subnetAt(o.DefaultSubnet, o.DefaultSubnetCIDR, created0), subnetAt(o.JoinSubnet, o.JoinCIDR, created0),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	e := newReconcilerEnv(t, objs...)
	e.reconcileSubnet(t, o.DefaultSubnet)
	e.reconcileSubnet(t, o.JoinSubnet)
	e.reconcile(t, e.nodes, "", "n1")
	return e
}

// A pod that writes kovn's result annotations itself (allocated, another pod's address, a
// cidr and gateway) gets an event and no network: no IP object, no switch port. Its victim
// keeps its address and port.
func TestForgedAnnotationsGetNoNetwork(t *testing.T) {
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "victim"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	e := defaultEnv(t, victim)
	e.reconcile(t, e.pods, "ns1", "victim")
	e.reconcile(t, e.ports, "ns1", "victim")
	var v corev1.Pod
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(victim), &v); err != nil {
		t.Fatal(err)
	}
	victimIP := v.Annotations[annotation.IPAddress]
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "forger", Annotations: map[string]string{
		annotation.Allocated: "true", annotation.IPAddress: victimIP, annotation.MACAddress: "0a:58:0a:10:00:66",
		annotation.CIDR: "10.16.0.0/16", annotation.Gateway: "10.16.0.1", annotation.LogicalSwitch: "ovn-default",
		annotation.PortName: "forger.ns1"}}, Spec: corev1.PodSpec{NodeName: "n1"}}
	if err := e.c.Create(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	e.events()
	e.reconcile(t, e.pods, "ns1", "forger")
	e.reconcile(t, e.ports, "ns1", "forger")
	evs := strings.Join(e.events(), "\n")
	if !strings.Contains(evs, "Warning "+ReasonUntrustedAnnotations) || !strings.Contains(evs, "Warning IPConflict") {
		t.Fatalf("events %q, want %s and IPConflict warnings", evs, ReasonUntrustedAnnotations)
	}
	var ip kovnv1.IP
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: "forger.ns1"}, &ip); !apierrors.IsNotFound(err) {
		t.Fatalf("the forger got an IP object: %+v %v", ip.Spec, err)
	}
	if p := e.lsp("forger.ns1"); p != nil {
		t.Fatalf("the forger got a switch port: %+v", p)
	}
	if p := e.lsp("victim.ns1"); p == nil || !strings.Contains(p.Addresses[0], " "+victimIP) {
		t.Fatalf("victim's port %+v, want address %s", p, victimIP)
	}
}

// Results are sticky because the controller recorded them, not because the pod says so: a pod
// that later rewrites its annotations keeps the address of its IP object.
func TestRewrittenAnnotationsDoNotMoveAPod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	e := defaultEnv(t, pod)
	e.reconcile(t, e.pods, "ns1", "a")
	e.reconcile(t, e.ports, "ns1", "a")
	before := e.lsp("a.ns1")
	var p corev1.Pod
	_ = e.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &p)
	p.Annotations[annotation.IPAddress], p.Annotations[annotation.MACAddress] = "10.16.9.9", "0a:58:0a:10:09:09"
	if err := e.c.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.pods, "ns1", "a")
	e.reconcile(t, e.ports, "ns1", "a")
	if after := e.lsp("a.ns1"); after == nil || after.Addresses[0] != before.Addresses[0] {
		t.Fatalf("port addresses %v after the pod rewrote its annotations, want %v", after, before.Addresses)
	}
}

// Subnet status reports what is used and programmed (finding 4).
func TestSubnetStatusReportsUsageAndProgramming(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	e := defaultEnv(t, pod)
	e.reconcile(t, e.pods, "ns1", "a")
	// The IP object event maps to its subnet; a count-only change may be held back, never
	// for more than a second.
	start := time.Now()
	for {
		res, err := e.subnets.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ovn-default"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter == 0 {
			break
		}
		time.Sleep(res.RequeueAfter)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("usage written after %v, want within 1s", d)
	}
	var sn kovnv1.Subnet
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: "ovn-default"}, &sn); err != nil {
		t.Fatal(err)
	}
	st := sn.Status
	if st.V4UsedIPs != 1 || st.Protocol != kovnv1.ProtocolIPv4 || st.Gateway != "10.16.0.1" || st.LogicalSwitch != "ovn-default" {
		t.Fatalf("status %+v: want 1 used, protocol IPv4, gateway 10.16.0.1", st)
	}
	var lss []nb.LogicalSwitch
	_ = e.nb.List(context.Background(), &lss)
	found := false
	for _, ls := range lss {
		found = found || ls.Name == "ovn-default"
	}
	if c := findCondition(sn.Status.Conditions, kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || !found {
		t.Fatalf("Ready %+v with switch in NB %v: Ready must mean programmed", c, found)
	}
}

// A subnet whose VPC does not exist is not Ready and says why; it programs once the VPC is
// there.
func TestSubnetInCustomVpc(t *testing.T) {
	sn := subnetAt("tenant", "10.16.0.0/24", created0) // overlaps ovn-default, but in another VPC
	sn.Spec.Vpc = "blue"
	e := defaultEnv(t, sn)
	e.reconcileSubnet(t, "tenant")
	var got kovnv1.Subnet
	_ = e.c.Get(context.Background(), types.NamespacedName{Name: "tenant"}, &got)
	if c := findCondition(got.Status.Conditions, kovnv1.ConditionValidated); c == nil || c.Reason != kovnv1.ReasonVpcNotFound {
		t.Fatalf("Validated %+v, want VpcNotFound", c)
	}
	if err := e.c.Create(context.Background(), &kovnv1.Vpc{ObjectMeta: metav1.ObjectMeta{Name: "blue"},
		Spec: kovnv1.VpcSpec{StaticRoutes: []kovnv1.StaticRoute{{CIDR: "0.0.0.0/0", NextHopIP: "10.16.0.254"}}}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, &VpcReconciler{Client: e.c, State: e.st, NB: e.nb}, "", "blue")
	e.reconcileSubnet(t, "tenant")
	_ = e.c.Get(context.Background(), types.NamespacedName{Name: "tenant"}, &got)
	if c := findCondition(got.Status.Conditions, kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v, want True once VPC blue exists", c)
	}
	var lrs []nb.LogicalRouter
	_ = e.nb.List(context.Background(), &lrs)
	for _, lr := range lrs {
		if lr.Name == "blue" && len(lr.Ports) == 1 && len(lr.StaticRoutes) == 1 && len(lr.Policies) == 0 {
			return
		}
	}
	t.Fatalf("router blue with one port, one static route and no gateway policies not found: %+v", lrs)
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// The checks the API documents exist: a namespace bound to two subnets and two default subnets
// are refused on the younger subnet; unimplemented fields are reported, not silently ignored.
func TestSubnetConflictsAndUnsupportedFields(t *testing.T) {
	older := subnetAt("a", "10.30.0.0/24", created0)
	older.Spec.Namespaces, older.Spec.Default = []string{"ns1"}, true
	sameNS := subnetAt("b", "10.31.0.0/24", created0.Add(time.Minute))
	sameNS.Spec.Namespaces = []string{"ns2", "ns1"}
	twoDefaults := subnetAt("c", "10.32.0.0/24", created0.Add(time.Minute))
	twoDefaults.Spec.Default = true
	unsupported := subnetAt("d", "10.33.0.0/24", created0.Add(time.Minute))
	unsupported.Spec.Vlan, unsupported.Spec.BGPAdvertise = "vlan10", true
	e := defaultEnv(t, older, sameNS, twoDefaults, unsupported)
	for _, n := range []string{"a", "b", "c", "d"} {
		e.reconcileSubnet(t, n)
	}
	cond := func(name, typ string) *metav1.Condition {
		var sn kovnv1.Subnet
		_ = e.c.Get(context.Background(), types.NamespacedName{Name: name}, &sn)
		return findCondition(sn.Status.Conditions, typ)
	}
	for name, reason := range map[string]string{"a": kovnv1.ReasonValid, "b": kovnv1.ReasonNamespaceConflict,
		"c": kovnv1.ReasonMultipleDefaults, "d": kovnv1.ReasonVlanNotFound} {
		if c := cond(name, kovnv1.ConditionValidated); c == nil || c.Reason != reason {
			t.Errorf("subnet %s: Validated %+v, want reason %s", name, c, reason)
		}
	}
	if c := cond("d", kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `vlan "vlan10" does not exist`) {
		t.Errorf("subnet d: Ready %+v, want False naming the missing vlan", c)
	}
	if e.hasSwitch("d") {
		t.Error("subnet d (missing vlan) got a switch: an underlay subnet must not fall back to the overlay")
	}
}

// A node's join address is recorded in its IP object; a node rewriting its own annotations
// does not move its ovn0 port, and a restart restores from the IP object.
func TestNodeJoinAddressFromIPObject(t *testing.T) {
	e := defaultEnv(t) // node n1 reconciled once
	ctx := context.Background()
	var ip kovnv1.IP
	if err := e.c.Get(ctx, types.NamespacedName{Name: NodeIPObjectName("n1")}, &ip); err != nil || ip.Spec.NodeName != "n1" || ip.Spec.V4IP == "" {
		t.Fatalf("node IP object %+v, %v", ip.Spec, err)
	}
	port := e.lsp("node-n1")
	var n corev1.Node
	_ = e.c.Get(ctx, types.NamespacedName{Name: "n1"}, &n)
	n.Annotations[annotation.JoinIP], n.Annotations[annotation.JoinMAC] = "100.64.0.200", "0a:58:64:40:00:c8"
	if err := e.c.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.nodes, "", "n1")
	if after := e.lsp("node-n1"); after == nil || after.Addresses[0] != port.Addresses[0] {
		t.Fatalf("ovn0 port %+v after the node rewrote its annotations, want %v", after, port.Addresses)
	}
	_ = e.c.Get(ctx, types.NamespacedName{Name: "n1"}, &n)
	if n.Annotations[annotation.JoinIP] != ip.Spec.V4IP {
		t.Fatalf("join_ip annotation %q, want it restored to %s", n.Annotations[annotation.JoinIP], ip.Spec.V4IP)
	}
	n.Annotations[annotation.JoinIP] = "100.64.0.201" // forged again, while the controller is down
	if err := e.c.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	st := NewState(DefaultOptions())
	if err := Restore(ctx, e.c, st); err != nil {
		t.Fatal(err)
	}
	if a, ok := st.IPAM.Lookup(nodeOwner("n1")); !ok || a.IPs[0].String() != ip.Spec.V4IP {
		t.Fatalf("restored join allocation %+v %v, want %s", a, ok, ip.Spec.V4IP)
	}
}

// A node's masquerade address is a second join address of its own, recorded in its own IP
// object and on its ovn0 port (OVN delivers replies to it there), kept across a restart, and
// released with the node.
func TestNodeMasqueradeAddress(t *testing.T) {
	e := defaultEnv(t) // node n1 reconciled once
	ctx := context.Background()
	var join, masq kovnv1.IP
	if err := e.c.Get(ctx, types.NamespacedName{Name: NodeIPObjectName("n1")}, &join); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Name: contract.NodeMasqIPName("n1")}, &masq); err != nil ||
		masq.Spec.NodeName != "n1" || !masq.Spec.Masquerade || masq.Spec.PodName != "" ||
		masq.Spec.V4IP == "" || masq.Spec.V4IP == join.Spec.V4IP || masq.Labels[contract.LabelNode] != "n1" ||
		masq.Spec.MACAddress != "" { // it rides on ovn0's port, with ovn0's MAC
		t.Fatalf("masquerade IP object %+v %v (join %s)", masq.Spec, err, join.Spec.V4IP)
	}
	if port := e.lsp("node-n1"); port == nil || !strings.Contains(port.Addresses[0], " "+join.Spec.V4IP) ||
		!strings.Contains(port.Addresses[0], " "+masq.Spec.V4IP) {
		t.Fatalf("ovn0 port %+v, want both %s and %s", port, join.Spec.V4IP, masq.Spec.V4IP)
	}
	st := NewState(DefaultOptions())
	if err := Restore(ctx, e.c, st); err != nil {
		t.Fatal(err)
	}
	if a, ok := st.IPAM.Lookup(nodeMasqOwner("n1")); !ok || a.IPs[0].String() != masq.Spec.V4IP {
		t.Fatalf("restored masquerade allocation %+v %v, want %s", a, ok, masq.Spec.V4IP)
	}
	if a, ok := st.IPAM.Lookup(nodeOwner("n1")); !ok || a.IPs[0].String() != join.Spec.V4IP {
		t.Fatalf("restored join allocation %+v %v, want %s", a, ok, join.Spec.V4IP)
	}
	e.reconcile(t, e.nodes, "", "n1") // again: the same two addresses
	var again kovnv1.IP
	if err := e.c.Get(ctx, types.NamespacedName{Name: contract.NodeMasqIPName("n1")}, &again); err != nil || again.Spec.V4IP != masq.Spec.V4IP {
		t.Fatalf("masquerade address moved: %+v %v, want %s", again.Spec, err, masq.Spec.V4IP)
	}
	var n corev1.Node
	_ = e.c.Get(ctx, types.NamespacedName{Name: "n1"}, &n)
	if err := e.c.Delete(ctx, &n); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.nodes, "", "n1")
	if err := e.c.Get(ctx, types.NamespacedName{Name: contract.NodeMasqIPName("n1")}, &again); !apierrors.IsNotFound(err) {
		t.Errorf("masquerade IP object after the node went: %v", err)
	}
	if _, ok := e.st.IPAM.Lookup(nodeMasqOwner("n1")); ok {
		t.Error("masquerade address still allocated after the node went")
	}
}
