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
	node := func(ready corev1.ConditionStatus, addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
			// Join annotations are the daemon's input, never the topology's: nodeIn ignores them.
			Annotations: map[string]string{annotation.JoinIP: "100.64.0.9", annotation.JoinMAC: "0a:58:64:40:00:09"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue},
				{Type: corev1.NodeReady, Status: ready},
			}, Addresses: addrs}}
	}
	internal := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	tests := []struct {
		desc string
		node *corev1.Node
		want topology.NodeIn
	}{
		{"ready dual stack", node(corev1.ConditionTrue, internal("172.18.0.2"), internal("fc00::2"),
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "1.2.3.4"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}),
			topology.NodeIn{Name: "n1", Ready: true, NodeIPs: testAddrs("172.18.0.2", "fc00::2")}},
		{"not ready", node(corev1.ConditionFalse, internal("172.18.0.2")), topology.NodeIn{Name: "n1", NodeIPs: testAddrs("172.18.0.2")}},
		{"ready unknown", node(corev1.ConditionUnknown, internal("172.18.0.2")), topology.NodeIn{Name: "n1", NodeIPs: testAddrs("172.18.0.2")}},
		{"garbage internal IP", node(corev1.ConditionTrue, internal("not-an-ip"), internal("172.18.0.2")),
			topology.NodeIn{Name: "n1", Ready: true, NodeIPs: testAddrs("172.18.0.2")}},
	}
	for _, tc := range tests {
		if got := nodeIn(tc.node); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.desc, got, tc.want)
		}
	}
}

// A pod's port comes from its IP object, which only the controller writes. Whatever the pod's
// annotations claim, they never reach the port.
func TestPodInFromIP(t *testing.T) {
	st := NewState(DefaultOptions())
	st.setSubnet(topology.SubnetIn{Name: "ovn-default", Switch: "ovn-default", CIDRs: testPrefixes("10.16.0.0/16"), Gateways: testAddrs("10.16.0.1")})
	ipObj := func(mutate func(*kovnv1.IP)) *kovnv1.IP {
		ip := &kovnv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "a.ns1"}, Spec: kovnv1.IPSpec{PodName: "a", Namespace: "ns1",
			Subnet: "ovn-default", NodeName: "n1", V4IP: "10.16.0.5", MACAddress: "0a:58:0a:10:00:05"}}
		if mutate != nil {
			mutate(ip)
		}
		return ip
	}
	forged := map[string]string{annotation.Allocated: "true", annotation.IPAddress: "10.16.0.77",
		annotation.MACAddress: "0a:58:0a:10:00:77", annotation.LogicalSwitch: "join", annotation.CIDR: "10.16.0.0/16", annotation.Gateway: "10.16.0.1"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a", Annotations: forged}, Spec: corev1.PodSpec{NodeName: "n1"}}
	want := topology.PodIn{Namespace: "ns1", Name: "a", Node: "n1", Switch: "ovn-default", IPs: testAddrs("10.16.0.5"), MAC: "0a:58:0a:10:00:05"}
	tests := []struct {
		desc   string
		ip     *kovnv1.IP
		wantOK bool
	}{
		{"the IP object wins over forged annotations", ipObj(nil), true},
		{"IP of another pod", ipObj(func(ip *kovnv1.IP) { ip.Spec.PodName = "b" }), false},
		{"IP of another namespace", ipObj(func(ip *kovnv1.IP) { ip.Spec.Namespace = "ns2" }), false},
		{"IP recorded for another node (pod recreated elsewhere)", ipObj(func(ip *kovnv1.IP) { ip.Spec.NodeName = "n2" }), false},
		{"subnet not valid", ipObj(func(ip *kovnv1.IP) { ip.Spec.Subnet = "broken" }), false},
		{"no address", ipObj(func(ip *kovnv1.IP) { ip.Spec.V4IP = "" }), false},
	}
	for _, tc := range tests {
		got, err := podInFromIP(tc.ip, pod, st)
		if (err == nil) != tc.wantOK {
			t.Errorf("%s: err = %v, want ok %v", tc.desc, err, tc.wantOK)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.desc, got, want)
		}
	}
}
