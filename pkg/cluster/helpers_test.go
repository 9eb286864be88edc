package cluster

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ipam"
)

var created0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testAddrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func testPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func TestOlder(t *testing.T) {
	sn := func(name string, created time.Time) *kovnv1.Subnet {
		return &kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	}
	tests := []struct {
		desc string
		a, b *kovnv1.Subnet
		want bool
	}{
		{"created earlier", sn("z", created0), sn("a", created0.Add(time.Second)), true},
		{"created later", sn("a", created0.Add(time.Second)), sn("z", created0), false},
		{"same time, name breaks the tie", sn("a", created0), sn("b", created0), true},
		{"same time, name breaks the tie (reverse)", sn("b", created0), sn("a", created0), false},
		{"no timestamps, by name", sn("a", time.Time{}), sn("b", time.Time{}), true},
		{"itself", sn("a", created0), sn("a", created0), false},
	}
	for _, tc := range tests {
		if got := older(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: older(%s, %s) = %v, want %v", tc.desc, tc.a.Name, tc.b.Name, got, tc.want)
		}
	}
}

func TestStatefulSetOf(t *testing.T) {
	yes, no := true, false
	owner := func(kind, name string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: kind, Name: name, Controller: controller}
	}
	tests := []struct {
		pod     string
		owners  []metav1.OwnerReference
		wantSts string
		wantOrd int
		wantOK  bool
	}{
		{"web-0", []metav1.OwnerReference{owner("StatefulSet", "web", &yes)}, "web", 0, true},
		{"web-12", []metav1.OwnerReference{owner("StatefulSet", "web", &yes)}, "web", 12, true},
		{"my-db-3", []metav1.OwnerReference{owner("StatefulSet", "my-db", &yes)}, "my-db", 3, true},
		{"web-0", []metav1.OwnerReference{owner("StatefulSet", "old", &no), owner("StatefulSet", "web", &yes)}, "web", 0, true},
		{"web-0", []metav1.OwnerReference{owner("StatefulSet", "web", &no)}, "", 0, false},
		{"web-0", []metav1.OwnerReference{owner("StatefulSet", "web", nil)}, "", 0, false},
		{"web-0", []metav1.OwnerReference{owner("ReplicaSet", "web", &yes)}, "", 0, false},
		{"web-0", nil, "", 0, false},
		{"web-x", []metav1.OwnerReference{owner("StatefulSet", "web", &yes)}, "web", 0, false},
		{"web", []metav1.OwnerReference{owner("StatefulSet", "web", &yes)}, "web", 0, false},
	}
	for _, tc := range tests {
		sts, ord, ok := statefulSetOf(&metav1.ObjectMeta{Name: tc.pod, OwnerReferences: tc.owners})
		if ok != tc.wantOK || (ok && (sts != tc.wantSts || ord != tc.wantOrd)) {
			t.Errorf("statefulSetOf(%s, %v) = %q, %d, %v; want %q, %d, %v", tc.pod, tc.owners, sts, ord, ok, tc.wantSts, tc.wantOrd, tc.wantOK)
		}
	}
}

func TestPodAnnotations(t *testing.T) {
	dual := topology.SubnetIn{Name: "ovn-default", Switch: "ls-default", CIDRs: testPrefixes("10.16.0.0/16", "fd00:10:16::/64"),
		Gateways: testAddrs("10.16.0.1", "fd00:10:16::1")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a"}}
	tests := []struct {
		desc             string
		ips              []netip.Addr
		wantIP, cidr, gw string
	}{
		{"dual stack", testAddrs("10.16.0.5", "fd00:10:16::5"), "10.16.0.5,fd00:10:16::5", "10.16.0.0/16,fd00:10:16::/64", "10.16.0.1,fd00:10:16::1"},
		{"IPv4 only", testAddrs("10.16.0.5"), "10.16.0.5", "10.16.0.0/16", "10.16.0.1"},
		{"IPv6 only: CIDR and gateway of its family", testAddrs("fd00:10:16::5"), "fd00:10:16::5", "fd00:10:16::/64", "fd00:10:16::1"},
	}
	for _, tc := range tests {
		got := podAnnotations(pod, dual, ipam.Allocation{Subnet: "ovn-default", IPs: tc.ips, MAC: "0a:58:0a:10:00:05"})
		want := map[string]string{
			annotation.IPAddress: tc.wantIP, annotation.MACAddress: "0a:58:0a:10:00:05", annotation.CIDR: tc.cidr,
			annotation.Gateway: tc.gw, annotation.LogicalSwitch: "ovn-default", annotation.PortName: "a.ns1",
			annotation.Allocated: "true",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.desc, got, want)
		}
		// What the controller writes, the daemon must read back.
		pn, ok, err := annotation.PodNetworkFrom(got)
		if !ok || err != nil || !reflect.DeepEqual(pn.IPs, tc.ips) {
			t.Errorf("%s: PodNetworkFrom = %+v, %v, %v", tc.desc, pn, ok, err)
		}
	}
}

func TestNodeIn(t *testing.T) {
	node := func(ready corev1.ConditionStatus, ann map[string]string, addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: ann}, Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue},
				{Type: corev1.NodeReady, Status: ready},
			},
			Addresses: addrs,
		}}
	}
	join := map[string]string{annotation.JoinIP: "100.64.0.2,fd00:100:64::2", annotation.JoinMAC: "0a:58:64:40:00:02"}
	internal := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	tests := []struct {
		desc string
		node *corev1.Node
		want topology.NodeIn
	}{
		{"ready dual stack", node(corev1.ConditionTrue, join, internal("172.18.0.2"), internal("fc00::2"),
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "1.2.3.4"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}),
			topology.NodeIn{Name: "n1", Ready: true, NodeIPs: testAddrs("172.18.0.2", "fc00::2"),
				JoinIPs: testAddrs("100.64.0.2", "fd00:100:64::2"), JoinMAC: "0a:58:64:40:00:02"}},
		{"not ready", node(corev1.ConditionFalse, join, internal("172.18.0.2")),
			topology.NodeIn{Name: "n1", NodeIPs: testAddrs("172.18.0.2"), JoinIPs: testAddrs("100.64.0.2", "fd00:100:64::2"), JoinMAC: "0a:58:64:40:00:02"}},
		{"ready unknown", node(corev1.ConditionUnknown, nil, internal("172.18.0.2")),
			topology.NodeIn{Name: "n1", NodeIPs: testAddrs("172.18.0.2")}},
		{"no join yet, garbage internal IP", node(corev1.ConditionTrue, nil, internal("not-an-ip"), internal("172.18.0.2")),
			topology.NodeIn{Name: "n1", Ready: true, NodeIPs: testAddrs("172.18.0.2")}},
		{"garbage join IP", node(corev1.ConditionTrue, map[string]string{annotation.JoinIP: "x"}),
			topology.NodeIn{Name: "n1", Ready: true}},
	}
	for _, tc := range tests {
		if got := nodeIn(tc.node); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.desc, got, tc.want)
		}
	}
}

func TestPodIn(t *testing.T) {
	allocated := func() map[string]string {
		return map[string]string{annotation.Allocated: "true", annotation.IPAddress: "10.16.0.5",
			annotation.CIDR: "10.16.0.0/16", annotation.Gateway: "10.16.0.1", annotation.MACAddress: "0a:58:0a:10:00:05",
			annotation.LogicalSwitch: "ovn-default", annotation.PortName: "a.ns1"}
	}
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a", Annotations: allocated()},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	want := topology.PodIn{Namespace: "ns1", Name: "a", Node: "n1", Subnet: "ovn-default", IPs: testAddrs("10.16.0.5"), MAC: "0a:58:0a:10:00:05"}
	tests := []struct {
		desc   string
		pod    *corev1.Pod
		wantOK bool
	}{
		{"running", pod(nil), true},
		{"pending", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), true},
		{"host network", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), false},
		{"succeeded", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"failed", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
		{"not allocated", pod(func(p *corev1.Pod) { delete(p.Annotations, annotation.Allocated) }), false},
		{"no annotations", pod(func(p *corev1.Pod) { p.Annotations = nil }), false},
		{"malformed results", pod(func(p *corev1.Pod) { p.Annotations[annotation.CIDR] = "x" }), false},
		{"invalid subnet", pod(func(p *corev1.Pod) { p.Annotations[annotation.LogicalSwitch] = "broken" }), false},
	}
	valid := map[string]bool{"ovn-default": true, "join": true}
	for _, tc := range tests {
		got, ok := podIn(tc.pod, valid)
		if ok != tc.wantOK {
			t.Errorf("%s: ok = %v, want %v", tc.desc, ok, tc.wantOK)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.desc, got, want)
		}
	}
}
