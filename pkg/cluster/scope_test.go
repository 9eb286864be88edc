package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

func TestSubnetScope(t *testing.T) {
	o := DefaultOptions()
	sub := func(name string, mut func(*kovnv1.SubnetSpec)) *kovnv1.Subnet {
		sn := &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kovnv1.SubnetSpec{Vpc: o.DefaultVpc}}
		if mut != nil {
			mut(&sn.Spec)
		}
		return sn
	}
	blue := &kovnv1.Vpc{ObjectMeta: metav1.ObjectMeta{Name: "blue"}, Spec: kovnv1.VpcSpec{Namespaces: []string{"t1"}}}
	open := &kovnv1.Vpc{ObjectMeta: metav1.ObjectMeta{Name: "open"}}
	for _, tc := range []struct {
		desc    string
		sn      *kovnv1.Subnet
		vpc     *kovnv1.Vpc
		allowed bool
	}{
		{"the default subnet", sub(o.DefaultSubnet, nil), nil, true},
		{"an unbound subnet of the default VPC", sub("shared", nil), nil, true},
		{"an unbound subnet with no VPC named", sub("novpc", func(s *kovnv1.SubnetSpec) { s.Vpc = "" }), nil, true},
		{"the join subnet", sub(o.JoinSubnet, nil), nil, false},
		{"a subnet bound to the pod's namespace", sub("mine", func(s *kovnv1.SubnetSpec) { s.Namespaces = []string{"t0", "t1"} }), nil, true},
		{"another tenant's subnet", sub("theirs", func(s *kovnv1.SubnetSpec) { s.Namespaces = []string{"t2"} }), nil, false},
		{"an unbound private subnet", sub("priv", func(s *kovnv1.SubnetSpec) { s.Private = true }), nil, false},
		{"a private subnet bound to the namespace", sub("mypriv", func(s *kovnv1.SubnetSpec) { s.Private, s.Namespaces = true, []string{"t1"} }), nil, true},
		{"an unbound underlay subnet", sub("vlan", func(s *kovnv1.SubnetSpec) { s.Vlan = "v100" }), nil, false},
		{"an underlay subnet bound to the namespace", sub("myvlan", func(s *kovnv1.SubnetSpec) { s.Vlan, s.Namespaces = "v100", []string{"t1"} }), nil, true},
		{"an attachment's subnet", sub("att", func(s *kovnv1.SubnetSpec) { s.Provider, s.Namespaces = "t1/att", []string{"t1"} }), nil, false},
		{"a subnet of a Vpc listing the namespace", sub("b1", func(s *kovnv1.SubnetSpec) { s.Vpc = "blue" }), blue, true},
		{"a subnet of a Vpc listing no namespace", sub("o1", func(s *kovnv1.SubnetSpec) { s.Vpc = "open" }), open, false},
		{"a subnet of a Vpc that does not exist", sub("x1", func(s *kovnv1.SubnetSpec) { s.Vpc = "gone" }), nil, false},
	} {
		err := subnetScope("t1", tc.sn, tc.vpc, o)
		if (err == nil) != tc.allowed || err != nil && !errors.Is(err, errOutOfScope) {
			t.Errorf("%s: %v, want allowed=%t", tc.desc, err, tc.allowed)
		}
	}
}

func TestPoolScope(t *testing.T) {
	for _, tc := range []struct {
		namespaces []string
		allowed    bool
	}{{nil, true}, {[]string{"t1"}, true}, {[]string{"t0", "t1"}, true}, {[]string{"t2"}, false}} {
		p := &kovnv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: kovnv1.IPPoolSpec{Namespaces: tc.namespaces}}
		if err := poolScope("t1", p); (err == nil) != tc.allowed {
			t.Errorf("pool for %v: %v, want allowed=%t", tc.namespaces, err, tc.allowed)
		}
	}
}

func TestRequestedMAC(t *testing.T) {
	gw := topology.RouterMAC("ovn-default-ovn-cluster")
	for mac, allowed := range map[string]bool{
		"02:00:00:10:01:00": true, "0A:58:0A:10:00:05": true, "fe:01:02:03:04:05": true,
		gw: gw[:5] == "0a:58", "0a:00:00:00:00:01": false, "00:00:00:00:00:00": false,
		"ff:ff:ff:ff:ff:ff": false, "01:00:5e:00:00:01": false,
	} {
		_, err := requestedMAC(mac)
		if (err == nil) != allowed {
			t.Errorf("requestedMAC(%s): %v, want allowed=%t", mac, err, allowed)
		}
	}
}

// A pod's requests name only what its namespace is given: the join subnet, another tenant's
// subnet, a pool for other namespaces and a router's MAC each get a NetworkRequestDenied event
// and no network; the same pod asking for what it may use is networked.
func TestOutOfScopeRequestsGetNoNetwork(t *testing.T) {
	o := DefaultOptions()
	theirs := subnetAt("theirs", "10.30.0.0/24", created0)
	theirs.Spec.Namespaces = []string{"t2"}
	pool := &kovnv1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "t2pool"},
		Spec: kovnv1.IPPoolSpec{Subnet: o.DefaultSubnet, IPs: []string{"10.16.5.0/28"}, Namespaces: []string{"t2"}}}
	e := defaultEnv(t, theirs, pool)
	e.reconcileSubnet(t, "theirs")
	requests := map[string][]string{
		"join":   {annotation.LogicalSwitch, o.JoinSubnet},
		"theirs": {annotation.LogicalSwitch, "theirs"},
		"pool":   {annotation.IPPool, "t2pool"},
		"gwmac":  {annotation.MACAddress, topology.RouterMAC("x")},
	}
	for name, kv := range requests {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: name, Annotations: map[string]string{kv[0]: kv[1]}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
		if name == "gwmac" {
			pod.Annotations[kv[0]] = "0a:12:34:56:78:9a"
		}
		if err := e.c.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		e.events()
		e.reconcile(t, e.pods, "t1", name)
		e.reconcile(t, e.ports, "t1", name)
		if evs := strings.Join(e.events(), "\n"); !strings.Contains(evs, "Warning "+ReasonNetworkRequestDenied) {
			t.Errorf("pod asking for %s=%s: events %q, want %s", kv[0], kv[1], evs, ReasonNetworkRequestDenied)
		}
		var ip kovnv1.IP
		if err := e.c.Get(context.Background(), types.NamespacedName{Name: IPObjectName("t1", name)}, &ip); !apierrors.IsNotFound(err) {
			t.Errorf("pod asking for %s=%s got an IP object: %+v %v", kv[0], kv[1], ip.Spec, err)
		}
		if p := e.lsp(IPObjectName("t1", name)); p != nil {
			t.Errorf("pod asking for %s=%s got a switch port %+v", kv[0], kv[1], p)
		}
	}
	// The same namespace asking for what it may use: networked.
	ok := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t2", Name: "ok", Annotations: map[string]string{annotation.LogicalSwitch: "theirs"}},
		Spec: corev1.PodSpec{NodeName: "n1"}}
	if err := e.c.Create(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.pods, "t2", "ok")
	e.reconcile(t, e.ports, "t2", "ok")
	if p := e.lsp(IPObjectName("t2", "ok")); p == nil {
		t.Errorf("t2's pod on its own subnet has no switch port; events %q", e.events())
	}
}

// Pod "p.b" of namespace "net1" and pod "p" of "b"'s attachment net1 both name IP object
// "p.b.net1": the pod path neither overwrites nor, when the pod goes, deletes the other owner's
// record; the pod gets a NetworkRefused event and no port.
func TestIPObjectNameCollision(t *testing.T) {
	other := &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "p.b.net1"},
		Spec: kovnv1.IPSpec{Namespace: "b", PodName: "p", Interface: "net1", Subnet: "ovn-default", NodeName: "n1", V4IP: "10.16.0.77", MACAddress: "0a:58:0a:10:00:4d"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "net1", Name: "p.b"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	e := defaultEnv(t, other, pod)
	e.events()
	e.reconcile(t, e.pods, "net1", "p.b")
	e.reconcile(t, e.ports, "net1", "p.b")
	if evs := strings.Join(e.events(), "\n"); !strings.Contains(evs, "Warning "+ReasonNetworkRefused) {
		t.Errorf("events %q, want %s", evs, ReasonNetworkRefused)
	}
	check := func(when string) {
		t.Helper()
		var ip kovnv1.IP
		if err := e.c.Get(context.Background(), types.NamespacedName{Name: "p.b.net1"}, &ip); err != nil || ip.Spec != other.Spec {
			t.Errorf("%s: the attachment's record is %+v (%v), want it untouched", when, ip.Spec, err)
		}
	}
	check("after the colliding pod's reconcile")
	if p := e.lsp("p.b.net1"); p != nil {
		t.Errorf("the colliding pod got a switch port %+v", p)
	}
	if err := e.c.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.pods, "net1", "p.b")
	check("after the colliding pod is gone")
}
