package topology

import (
	"reflect"
	"strings"
	"testing"
)

// TestPrivateSubnetACLs: per family of the subnet, a drop above the NetworkPolicy bands of
// traffic to the subnet from every source but itself and its allowSubnets (of that family),
// plus the lowest-priority allow-related that makes the switch stateful. The join CIDRs are
// not admitted: only a node's own join address passes (ownJoinACLs, above the drop).
func TestPrivateSubnetACLs(t *testing.T) {
	ids := func(rule, f string) map[string]string {
		return map[string]string{SubnetKey: "s", SubnetRuleKey: rule, IPFamilyKey: f}
	}
	deny := func(f, dst string, admitted ...string) ACL {
		var srcs []string
		for _, p := range complement(prefixes(admitted...), f == "ip4") {
			srcs = append(srcs, p.String())
		}
		return ACL{Switch: "s-ls", Name: "s:private/deny/" + f, Direction: "to-lport", Priority: PrioritySubnetPrivateDeny,
			Match: f + ".dst == " + dst + " && " + f + ".src == {" + strings.Join(srcs, ", ") + "}", Action: "drop",
			ExternalIDs: ids("private/deny", f)}
	}
	stateful := func(f, match string) ACL {
		return ACL{Switch: "s-ls", Name: "s:private/stateful/" + f, Direction: "to-lport", Priority: PrioritySubnetStateful,
			Match: match, Action: "allow-related", ExternalIDs: ids("private/stateful", f)}
	}
	v4 := SubnetIn{Name: "s", Vpc: "ovn-cluster", Switch: "s-ls", CIDRs: prefixes("10.1.0.0/16"), Gateways: addrs("10.1.0.1"),
		Private: true, AllowSubnets: prefixes("10.17.0.0/16", "fd00:17::/64")}
	v6 := SubnetIn{Name: "s", Vpc: "ovn-cluster", Switch: "s-ls", CIDRs: prefixes("fd00:1::/64"), Gateways: addrs("fd00:1::1"),
		Private: true}
	dual := v4
	dual.CIDRs, dual.Gateways = prefixes("10.1.0.0/16", "fd00:1::/64"), addrs("10.1.0.1", "fd00:1::1")
	notPrivate := dual
	notPrivate.Private = false
	open := v4
	open.AllowSubnets = prefixes("0.0.0.0/0")
	for _, tc := range []struct {
		name string
		in   SubnetIn
		join *SubnetIn
		want []ACL
	}{
		{"IPv4: own CIDR, allowSubnets of its family, not join", v4, &joinIn, []ACL{
			deny("ip4", "10.1.0.0/16", "10.1.0.0/16", "10.17.0.0/16"),
			stateful("ip4", "ip4.dst == 10.1.0.0/16")}},
		{"IPv6: link-local always admitted", v6, &joinIn, []ACL{
			deny("ip6", "fd00:1::/64", "fd00:1::/64", "fe80::/10"),
			stateful("ip6", "ip6.dst == fd00:1::/64")}},
		{"dual stack: one pair per family", dual, &joinIn, []ACL{
			deny("ip4", "10.1.0.0/16", "10.1.0.0/16", "10.17.0.0/16"),
			deny("ip6", "fd00:1::/64", "fd00:1::/64", "fd00:17::/64", "fe80::/10"),
			stateful("ip4", "ip4.dst == 10.1.0.0/16"),
			stateful("ip6", "ip6.dst == fd00:1::/64")}},
		{"no join subnet yet: the subnet alone", v4, nil, []ACL{
			deny("ip4", "10.1.0.0/16", "10.1.0.0/16", "10.17.0.0/16"),
			stateful("ip4", "ip4.dst == 10.1.0.0/16")}},
		{"every source admitted: nothing to drop", open, &joinIn, []ACL{stateful("ip4", "ip4.dst == 10.1.0.0/16")}},
		{"not private: no ACL", notPrivate, &joinIn, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := ForSubnet(tc.in, tc.join, nil)
			if !reflect.DeepEqual(sh.ACLs, tc.want) {
				t.Errorf("ACLs\n got %+v\nwant %+v", sh.ACLs, tc.want)
			}
			for _, a := range sh.ACLs {
				if a.Action == "drop" && a.Priority <= PriorityPolicyAllow {
					t.Errorf("drop at %d: a NetworkPolicy allow (%d) would open the subnet", a.Priority, PriorityPolicyAllow)
				}
				if a.Action == "allow-related" && a.Priority >= PriorityPolicyDeny {
					t.Errorf("stateful ACL at %d would override NetworkPolicy denies (%d)", a.Priority, PriorityPolicyDeny)
				}
			}
		})
	}
}

// TestComplement: the complement covers exactly the addresses no admitted prefix covers,
// with few prefixes (one flow each in OVN), in both families.
func TestComplement(t *testing.T) {
	for _, tc := range []struct {
		admitted []string
		v4       bool
		want     []string // exact, when short
		max      int
		in, out  []string // addresses that must be dropped / admitted
	}{
		{admitted: []string{"0.0.0.0/1"}, v4: true, want: []string{"128.0.0.0/1"}},
		{admitted: []string{"0.0.0.0/0"}, v4: true, want: nil},
		{admitted: nil, v4: true, want: []string{"0.0.0.0/0"}},
		{admitted: []string{"10.0.0.0/8", "10.1.0.0/16", "fd00::/8"}, v4: true, max: 8,
			in: []string{"0.0.0.0", "9.255.255.255", "11.0.0.0", "255.255.255.255"}, out: []string{"10.0.0.0", "10.255.255.255"}},
		{admitted: []string{"10.1.0.0/16", "10.17.0.0/16", "100.64.0.0/16"}, v4: true, max: 16 * 3,
			in:  []string{"10.0.255.255", "10.2.0.0", "10.16.255.255", "10.18.0.0", "100.63.255.255", "100.65.0.0", "192.168.1.1"},
			out: []string{"10.1.0.0", "10.1.255.255", "10.17.3.4", "100.64.0.1"}},
		{admitted: []string{"fd00:1::/64", "fd00:17::/64", "fd00:100:64::/112", "fe80::/10", "255.0.0.0/8"}, v4: false,
			max: 64 + 64 + 112 + 10, in: []string{"::", "fd00:1:0:1::", "fd00:100:64::1:0", "fec0::", "ffff::1", "2001:db8::1"},
			out: []string{"fd00:1::1", "fd00:17::ffff", "fd00:100:64::5", "fe80::1", "febf:ffff::"}},
		{admitted: []string{"::/0"}, v4: false, want: nil},
	} {
		got := complement(prefixes(tc.admitted...), tc.v4)
		if tc.want != nil || (tc.max == 0 && len(got) != 0) {
			var gs []string
			for _, p := range got {
				gs = append(gs, p.String())
			}
			if strings.Join(gs, ",") != strings.Join(tc.want, ",") {
				t.Errorf("complement(%v) = %v, want %v", tc.admitted, gs, tc.want)
			}
		}
		if tc.max > 0 && len(got) > tc.max {
			t.Errorf("complement(%v): %d prefixes, want at most %d", tc.admitted, len(got), tc.max)
		}
		covered := func(s string) bool {
			for _, p := range got {
				if p.Contains(addrs(s)[0]) {
					return true
				}
			}
			return false
		}
		for _, a := range tc.in {
			if !covered(a) {
				t.Errorf("complement(%v) misses %s", tc.admitted, a)
			}
		}
		for _, a := range tc.out {
			if covered(a) {
				t.Errorf("complement(%v) covers admitted %s", tc.admitted, a)
			}
		}
		for i := 1; i < len(got); i++ {
			if !lastAddr(got[i-1]).Less(got[i].Addr()) {
				t.Errorf("complement(%v): %s and %s overlap or are out of order", tc.admitted, got[i-1], got[i])
			}
		}
	}
}

// TestPrivateSubnetLongName: ACL names stay within the schema's 63 bytes and unique.
func TestPrivateSubnetLongName(t *testing.T) {
	in := SubnetIn{Name: "a-very-long-subnet-name-that-goes-on-and-on-and-on-for-a-while", Switch: "ls", Vpc: "v",
		CIDRs: prefixes("10.1.0.0/16", "fd00:1::/64"), Gateways: addrs("10.1.0.1", "fd00:1::1"), Private: true}
	seen := map[string]bool{}
	for _, a := range ForSubnet(in, nil, nil).ACLs {
		if len(a.Name) > 63 || seen[a.Name] {
			t.Errorf("name %q: %d bytes, seen before %t", a.Name, len(a.Name), seen[a.Name])
		}
		seen[a.Name] = true
	}
	if len(seen) != 4 {
		t.Errorf("%d distinct names, want 4", len(seen))
	}
}

// TestSubnetAdminACLs: spec.acls on the subnet's switch above every other band, named by
// index, beside the private ACLs; an underlay subnet's switch carries them too.
func TestSubnetAdminACLs(t *testing.T) {
	in := SubnetIn{Name: "s", Vpc: "ovn-cluster", Switch: "s-ls", CIDRs: prefixes("10.1.0.0/16"), Gateways: addrs("10.1.0.1"),
		ACLs: []SubnetACLIn{{Direction: "to-lport", Priority: 100, Match: "ip4.src == 10.17.0.0/16 && tcp.dst == 8080", Action: "drop"},
			{Direction: "from-lport", Priority: 0, Match: "udp.dst == 53", Action: "allow-related"}}}
	want := []ACL{
		{Switch: "s-ls", Name: "s:acl/0", Direction: "to-lport", Priority: 2100, Match: "ip4.src == 10.17.0.0/16 && tcp.dst == 8080",
			Action: "drop", ExternalIDs: map[string]string{SubnetKey: "s", SubnetRuleKey: "acl/0"}},
		{Switch: "s-ls", Name: "s:acl/1", Direction: "from-lport", Priority: 2000, Match: "udp.dst == 53",
			Action: "allow-related", ExternalIDs: map[string]string{SubnetKey: "s", SubnetRuleKey: "acl/1"}},
	}
	if got := ForSubnet(in, &joinIn, nil).ACLs; !reflect.DeepEqual(got, want) {
		t.Errorf("overlay subnet ACLs:\n got %+v\nwant %+v", got, want)
	}
	if PrioritySubnetACLBase <= PrioritySubnetPrivateDeny || PrioritySubnetACLBase <= PriorityPolicyAllow {
		t.Errorf("the Subnet ACL band (%d) must be above the private deny (%d) and NetworkPolicy (%d)",
			PrioritySubnetACLBase, PrioritySubnetPrivateDeny, PriorityPolicyAllow)
	}
	private := in
	private.Private = true
	if got := ForSubnet(private, &joinIn, nil).ACLs; len(got) != 4 || got[2].Name != "s:acl/0" {
		t.Errorf("private subnet with ACLs: %+v", got)
	}
	underlay := in
	underlay.Underlay = &UnderlayIn{Provider: "phys", VlanID: 100}
	if got := ForSubnet(underlay, &joinIn, nil).ACLs; !reflect.DeepEqual(got, want) {
		t.Errorf("underlay subnet ACLs: %+v", got)
	}
}
