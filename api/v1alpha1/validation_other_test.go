package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestIPPoolValidate(t *testing.T) {
	subnet := &SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64"}
	for _, tc := range []struct {
		name         string
		spec         IPPoolSpec
		reason, frag string
	}{
		{name: "ok", spec: IPPoolSpec{Subnet: "s", IPs: []string{"10.16.1.1", "10.16.2.1..10.16.2.9", "10.16.3.0/24", "fd00::10..fd00::20"}, Namespaces: []string{"ns1"}}},
		{name: "no subnet", spec: IPPoolSpec{IPs: []string{"10.16.1.1"}}, reason: ReasonMissingField, frag: "subnet is required"},
		{name: "no ips", spec: IPPoolSpec{Subnet: "s"}, reason: ReasonInvalidIPs, frag: "ips is empty"},
		{name: "bad entry", spec: IPPoolSpec{Subnet: "s", IPs: []string{"10.16.1.1", "10.16.2.9..10.16.2.1"}}, reason: ReasonInvalidIPs, frag: "spec.ips[1]"},
		{name: "bad namespace", spec: IPPoolSpec{Subnet: "s", IPs: []string{"10.16.1.1"}, Namespaces: []string{"a_b"}}, reason: ReasonInvalidNamespaces, frag: "a_b"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.spec.Validate(), tc.reason, tc.frag) })
	}
	for _, tc := range []struct {
		name, entry, reason, frag string
	}{
		{"inside v4", "10.16.0.0/17", "", ""},
		{"inside v6", "fd00::1..fd00::ffff", "", ""},
		{"outside", "10.17.0.1", ReasonOutsideSubnet, "10.17.0.1 is outside subnet s (10.16.0.0/16,fd00::/64)"},
		{"straddles", "10.16.255.250..10.17.0.5", ReasonOutsideSubnet, "outside"},
		{"larger cidr", "10.0.0.0/8", ReasonOutsideSubnet, "outside"},
		{"malformed", "nope", ReasonInvalidIPs, "not an IP"},
	} {
		t.Run("in subnet/"+tc.name, func(t *testing.T) {
			p := IPPoolSpec{Subnet: "s", IPs: []string{tc.entry}}
			wantErr(t, p.ValidateInSubnet(subnet), tc.reason, tc.frag)
		})
	}
	p := IPPoolSpec{Subnet: "s", IPs: []string{"10.16.0.1"}}
	wantErr(t, p.ValidateInSubnet(&SubnetSpec{CIDRBlock: "bad"}), ReasonInvalidCIDR, "subnet s is invalid")
}

func TestPoolOverlap(t *testing.T) {
	pool := func(name, subnet string, ips ...string) *IPPool {
		p := &IPPool{Spec: IPPoolSpec{Subnet: subnet, IPs: ips}}
		p.Name = name
		return p
	}
	for _, tc := range []struct {
		name string
		a, b *IPPool
		frag string
	}{
		{"disjoint", pool("a", "s", "10.16.0.1..10.16.0.9"), pool("b", "s", "10.16.0.10"), ""},
		{"range vs cidr", pool("a", "s", "10.16.0.1..10.16.0.9"), pool("b", "s", "10.16.0.0/29"), "10.16.0.1..10.16.0.9 overlaps 10.16.0.0..10.16.0.7 of IPPool b in subnet s"},
		{"other subnet", pool("a", "s", "10.16.0.1"), pool("b", "t", "10.16.0.1"), ""},
		{"same pool", pool("a", "s", "10.16.0.1"), pool("a", "s", "10.16.0.1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.frag == "" {
				wantErr(t, CheckPoolOverlap(tc.a, tc.b), "", "")
			} else {
				wantErr(t, CheckPoolOverlap(tc.a, tc.b), ReasonOverlap, tc.frag)
			}
		})
	}
}

func TestIPValidate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		spec         IPSpec
		reason, frag string
	}{
		{name: "dual", spec: IPSpec{Subnet: "s", PodName: "p", Namespace: "n", V4IP: "10.16.0.5", V6IP: "fd00::5", MACAddress: "0a:58:0a:10:00:05"}},
		{name: "node port v6 only", spec: IPSpec{Subnet: "join", NodeName: "n1", V6IP: "fd00::5"}},
		{name: "no subnet", spec: IPSpec{V4IP: "10.16.0.5"}, reason: ReasonMissingField, frag: "subnet"},
		{name: "no address", spec: IPSpec{Subnet: "s"}, reason: ReasonInvalidIPs, frag: "at least one"},
		{name: "v6 in v4 field", spec: IPSpec{Subnet: "s", V4IP: "fd00::5"}, reason: ReasonInvalidIPs, frag: "is an IPv6 address"},
		{name: "v4 in v6 field", spec: IPSpec{Subnet: "s", V6IP: "10.0.0.1"}, reason: ReasonInvalidIPs, frag: "is an IPv4 address"},
		{name: "bad mac", spec: IPSpec{Subnet: "s", V4IP: "10.16.0.5", MACAddress: "0a:58:0a:10:00"}, reason: ReasonInvalidMAC, frag: "48-bit"},
		{name: "upper-case mac", spec: IPSpec{Subnet: "s", V4IP: "10.16.0.5", MACAddress: "0A:58:0A:10:00:05"}, reason: ReasonInvalidMAC, frag: "lower-case"},
		{name: "multicast mac", spec: IPSpec{Subnet: "s", V4IP: "10.16.0.5", MACAddress: "01:00:5e:00:00:01"}, reason: ReasonInvalidMAC, frag: "multicast"},
		{name: "eui64 mac", spec: IPSpec{Subnet: "s", V4IP: "10.16.0.5", MACAddress: "0a:58:0a:10:00:05:00:01"}, reason: ReasonInvalidMAC, frag: "48-bit"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.spec.Validate(), tc.reason, tc.frag) })
	}
}

func TestVpcValidate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		spec         VpcSpec
		reason, frag string
	}{
		{name: "empty", spec: VpcSpec{}},
		{name: "routes", spec: VpcSpec{
			Namespaces:   []string{"tenant"},
			StaticRoutes: []StaticRoute{{CIDR: "0.0.0.0/0", NextHopIP: "10.0.0.1"}, {CIDR: "::/0", NextHopIP: "fd00::1", Policy: RoutePolicySource}},
			PolicyRoutes: []PolicyRoute{{Priority: 100, Match: "ip4.src == 10.0.1.0/24", Action: PolicyRouteReroute, NextHopIP: "10.0.0.254"}, {Priority: 0, Match: "1", Action: PolicyRouteAllow}},
		}},
		{name: "static bad cidr", spec: VpcSpec{StaticRoutes: []StaticRoute{{CIDR: "10.0.0.1/8", NextHopIP: "10.0.0.1"}}}, reason: ReasonInvalidRoute, frag: "staticRoutes[0].cidr"},
		{name: "static bad nexthop", spec: VpcSpec{StaticRoutes: []StaticRoute{{CIDR: "10.0.0.0/8", NextHopIP: "x"}}}, reason: ReasonInvalidRoute, frag: "nextHopIP"},
		{name: "static family mix", spec: VpcSpec{StaticRoutes: []StaticRoute{{CIDR: "10.0.0.0/8", NextHopIP: "fd00::1"}}}, reason: ReasonInvalidRoute, frag: "different IP families"},
		{name: "static bad policy", spec: VpcSpec{StaticRoutes: []StaticRoute{{CIDR: "10.0.0.0/8", NextHopIP: "10.0.0.1", Policy: "both"}}}, reason: ReasonInvalidRoute, frag: "both"},
		{name: "reroute without nexthop", spec: VpcSpec{PolicyRoutes: []PolicyRoute{{Priority: 1, Match: "1", Action: PolicyRouteReroute}}}, reason: ReasonInvalidRoute, frag: "required when action is reroute"},
		{name: "priority too high", spec: VpcSpec{PolicyRoutes: []PolicyRoute{{Priority: 40000, Match: "1", Action: PolicyRouteDrop}}}, reason: ReasonInvalidRoute, frag: "0..32767"},
		{name: "empty match", spec: VpcSpec{PolicyRoutes: []PolicyRoute{{Priority: 1, Action: PolicyRouteDrop}}}, reason: ReasonInvalidRoute, frag: "match is empty"},
		{name: "bad action", spec: VpcSpec{PolicyRoutes: []PolicyRoute{{Priority: 1, Match: "1", Action: "nat"}}}, reason: ReasonInvalidRoute, frag: "nat"},
		{name: "bad namespace", spec: VpcSpec{Namespaces: []string{"-x"}}, reason: ReasonInvalidNamespaces, frag: "-x"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.spec.Validate(), tc.reason, tc.frag) })
	}
}

// TestScheme checks every kind and its list are registered under kovn.io/v1alpha1, and that the
// generated DeepCopy really copies (a shallow copy would share the slices).
func TestScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Vpc", "VpcList", "Subnet", "SubnetList", "IP", "IPList", "IPPool", "IPPoolList"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("kind %s not registered", kind)
		}
	}
	orig := &Subnet{Spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.16.0.2"}},
		Status: SubnetStatus{Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue}}}}
	cp := orig.DeepCopyObject().(*Subnet)
	cp.Spec.ExcludeIPs[0] = "changed"
	cp.Status.Conditions[0].Status = metav1.ConditionFalse
	if orig.Spec.ExcludeIPs[0] != "10.16.0.2" || orig.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Error("DeepCopy shares memory with the original")
	}
}
