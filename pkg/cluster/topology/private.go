package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
)

// Priorities of a private subnet's ACLs (spec.private, spec.allowSubnets). They share OVN's
// one ACL stage with NetworkPolicy (OVN 23.03 has no tiers), so the bands are priorities.
const (
	// PrioritySubnetPrivateDeny is above every NetworkPolicy band (PriorityPolicyDeny,
	// PriorityPolicyAllow): the isolation is the admin's, on a cluster-scoped Subnet, and a
	// namespace user's NetworkPolicy allow must not open it. NetworkPolicy still decides among
	// the sources the subnet admits, since this ACL matches only the others.
	PrioritySubnetPrivateDeny = 1900
	// PrioritySubnetStateful is the lowest priority there is, below PriorityPolicyDeny, so its
	// allow-related can never override a NetworkPolicy deny. The ACL exists only to make the
	// switch stateful: OVN lets replies of established connections through (its priority-65532
	// "ct.est && ct.rpl" flow) and commits allowed connections only on switches with a stateful
	// ACL. Without it the drop would also eat the replies to connections a private pod opened
	// to a pod outside (the reply's source is not admitted).
	PrioritySubnetStateful = 1
)

// Keys of a subnet ACL's external_ids (beside ownership), for debugging and ACL logs.
const (
	SubnetKey     = "kovn.io/subnet"
	SubnetRuleKey = "kovn.io/subnet-rule" // private/deny | private/stateful
)

// linkLocal6 is always admitted into a private IPv6 subnet: link-local sources come only
// from the subnet's own segment (routers never forward them), and neighbour discovery answers
// a link-local solicitation from a link-local address; dropping them could break ND.
var linkLocal6 = netip.MustParsePrefix("fe80::/10")

// privateACLs returns the ACLs of a private subnet's switch, none when it is not private. Per
// family of the subnet: a to-lport drop of IP traffic to the subnet's CIDR from any source but
// the subnet itself, its allowSubnets and the nodes (the join CIDRs: kubelet probes and node
// traffic must always reach pods), and the allow-related that makes the switch stateful.
// ARP is not IP and never matches; ND is ICMPv6 but goes to multicast or link-local
// destinations, or between addresses of the subnet, all of which pass.
func privateACLs(s SubnetIn, join *SubnetIn) []ACL {
	if !s.Private {
		return nil
	}
	var out []ACL
	for _, c := range s.CIDRs {
		f := family(c.Addr())
		admitted := []netip.Prefix{c}
		admitted = append(admitted, s.AllowSubnets...)
		if join != nil {
			admitted = append(admitted, join.CIDRs...)
		}
		if f == "ip6" {
			admitted = append(admitted, linkLocal6)
		}
		var srcs []string
		for _, p := range admitted {
			if family(p.Addr()) == f {
				srcs = append(srcs, p.Masked().String())
			}
		}
		sort.Strings(srcs)
		dst := fmt.Sprintf("%s.dst == %s", f, c.Masked())
		out = append(out,
			subnetACL(s, "private/deny", f, PrioritySubnetPrivateDeny,
				fmt.Sprintf("%s && !(%s.src == %s)", dst, f, valueSet(slices.Compact(srcs))), "drop"),
			subnetACL(s, "private/stateful", f, PrioritySubnetStateful, dst, "allow-related"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func subnetACL(s SubnetIn, rule, f string, prio int, match, action string) ACL {
	return ACL{Switch: s.Switch, Name: ACLName(s.Name, rule+"/"+f), Direction: "to-lport", Priority: prio, Match: match,
		Action: action, ExternalIDs: map[string]string{SubnetKey: s.Name, SubnetRuleKey: rule, IPFamilyKey: f}}
}
