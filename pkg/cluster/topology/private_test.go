package topology

import (
	"reflect"
	"testing"
)

// TestPrivateSubnetACLs: per family of the subnet, a drop above the NetworkPolicy bands of
// traffic to the subnet from anything but itself, its allowSubnets (of that family) and the
// join CIDRs, plus the lowest-priority allow-related that makes the switch stateful.
func TestPrivateSubnetACLs(t *testing.T) {
	ids := func(rule, f string) map[string]string {
		return map[string]string{SubnetKey: "s", SubnetRuleKey: rule, IPFamilyKey: f}
	}
	deny := func(f, match string) ACL {
		return ACL{Switch: "s-ls", Name: "s:private/deny/" + f, Direction: "to-lport", Priority: PrioritySubnetPrivateDeny,
			Match: match, Action: "drop", ExternalIDs: ids("private/deny", f)}
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
	for _, tc := range []struct {
		name string
		in   SubnetIn
		join *SubnetIn
		want []ACL
	}{
		{"IPv4: own CIDR, allowSubnets of its family, join", v4, &joinIn, []ACL{
			deny("ip4", "ip4.dst == 10.1.0.0/16 && !(ip4.src == {10.1.0.0/16, 10.17.0.0/16, 100.64.0.0/16})"),
			stateful("ip4", "ip4.dst == 10.1.0.0/16")}},
		{"IPv6: link-local always admitted", v6, &joinIn, []ACL{
			deny("ip6", "ip6.dst == fd00:1::/64 && !(ip6.src == {fd00:100:64::/112, fd00:1::/64, fe80::/10})"),
			stateful("ip6", "ip6.dst == fd00:1::/64")}},
		{"dual stack: one pair per family", dual, &joinIn, []ACL{
			deny("ip4", "ip4.dst == 10.1.0.0/16 && !(ip4.src == {10.1.0.0/16, 10.17.0.0/16, 100.64.0.0/16})"),
			deny("ip6", "ip6.dst == fd00:1::/64 && !(ip6.src == {fd00:100:64::/112, fd00:17::/64, fd00:1::/64, fe80::/10})"),
			stateful("ip4", "ip4.dst == 10.1.0.0/16"),
			stateful("ip6", "ip6.dst == fd00:1::/64")}},
		{"no join subnet yet: the subnet alone", v4, nil, []ACL{
			deny("ip4", "ip4.dst == 10.1.0.0/16 && !(ip4.src == {10.1.0.0/16, 10.17.0.0/16})"),
			stateful("ip4", "ip4.dst == 10.1.0.0/16")}},
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
