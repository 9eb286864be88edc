package topology

import (
	"fmt"
	"net/netip"
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
	// to a pod outside (the reply's source is not admitted). A default-VPC switch is stateful
	// anyway (OVN counts the Services' load balancer VIPs), a custom VPC's is not: the e2e
	// test's custom-VPC case fails without this ACL.
	PrioritySubnetStateful = 1
)

// Keys of a subnet ACL's external_ids (beside ownership), for debugging and ACL logs.
const (
	SubnetKey     = "kovn.io/subnet"
	SubnetRuleKey = "kovn.io/subnet-rule" // private/deny | private/stateful | acl/<index in spec.acls>
)

// linkLocal6 is always admitted into a private IPv6 subnet: link-local sources come only
// from the subnet's own segment (routers never forward them), and neighbour discovery answers
// a link-local solicitation from a link-local address; dropping them could break ND.
var linkLocal6 = netip.MustParsePrefix("fe80::/10")

// privateACLs returns the ACLs of a private subnet's switch, none when it is not private. Per
// family of the subnet: a to-lport drop of IP traffic to the subnet's CIDR from any source but
// the subnet itself and its allowSubnets, and the allow-related that makes the switch stateful.
// A node's own join address (kubelet probes) passes by ownJoinACLs, above the drop; other
// nodes' join addresses are dropped like any other source.
// ARP is not IP and never matches; ND is ICMPv6 but goes to multicast or link-local
// destinations, or between addresses of the subnet, all of which pass.
//
// The drop names the sources it drops (the complement of the admitted ones), not
// "!(src == {admitted})": ovn-controller expands a negated prefix into one flow per bit, and
// the negations of a set multiply (three IPv6 /64s: 64 x 64 x 10 = 40,960 OpenFlow flows per
// chassis, rebuilt on every allowSubnets change). The complement is a set of at most a few
// prefixes per admitted bit: one flow each.
func privateACLs(s SubnetIn) []ACL {
	if !s.Private {
		return nil
	}
	var out []ACL
	for _, c := range s.CIDRs {
		f := family(c.Addr())
		admitted := []netip.Prefix{c}
		admitted = append(admitted, s.AllowSubnets...)
		if f == "ip6" {
			admitted = append(admitted, linkLocal6)
		}
		dst := fmt.Sprintf("%s.dst == %s", f, c.Masked())
		out = append(out, subnetACL(s, "private/stateful", f, PrioritySubnetStateful, dst, "allow-related"))
		var srcs []string
		for _, p := range complement(admitted, c.Addr().Is4()) {
			srcs = append(srcs, p.String())
		}
		if len(srcs) > 0 { // nothing to drop when the admitted sources are every address
			out = append(out, subnetACL(s, "private/deny", f, PrioritySubnetPrivateDeny,
				fmt.Sprintf("%s && %s.src == %s", dst, f, valueSet(srcs)), "drop"))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func subnetACL(s SubnetIn, rule, f string, prio int, match, action string) ACL {
	return ACL{Switch: s.Switch, Name: ACLName(s.Name, rule+"/"+f), Direction: "to-lport", Priority: prio, Match: match,
		Action: action, ExternalIDs: map[string]string{SubnetKey: s.Name, SubnetRuleKey: rule, IPFamilyKey: f}}
}

// PrioritySubnetACLBase is the OVN priority of a Subnet ACL of priority 0: the admin's rules
// sit above the private isolation (PrioritySubnetPrivateDeny) and every NetworkPolicy band.
const PrioritySubnetACLBase = 2000

// adminACLs are a subnet's spec.acls on its switch, named by their index (a changed match or
// action updates the row in place; the whole list is one shard, one transaction).
func adminACLs(s SubnetIn) []ACL {
	out := make([]ACL, 0, len(s.ACLs))
	for i, a := range s.ACLs {
		rule := fmt.Sprintf("acl/%d", i)
		out = append(out, ACL{Switch: s.Switch, Name: ACLName(s.Name, rule), Direction: a.Direction,
			Priority: PrioritySubnetACLBase + a.Priority, Match: a.Match, Action: a.Action,
			ExternalIDs: map[string]string{SubnetKey: s.Name, SubnetRuleKey: rule}, LogSeverity: a.LogSeverity})
	}
	return out
}

// complement returns the prefixes, in address order, that cover exactly the addresses of the
// family (IPv4 when v4) no prefix of in covers: each gap between them cut into the largest
// aligned blocks.
func complement(in []netip.Prefix, v4 bool) []netip.Prefix {
	all := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	if v4 {
		all = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	return prefixesLeft(all, in)
}

// prefixesLeft returns the fewest prefixes, in address order, holding the addresses of within
// that no prefix of taken holds. Prefixes of taken outside within (or of the other family)
// count for nothing; one holding within whole leaves nothing.
//
// The result is bounded, so is an ACL written from it: a prefix of taken inside a /n leaves,
// at each length from n+1 down to its own, at most the sibling of the prefix that holds it, so
// k of them in a /n of a family of maxbits bits give at most k*(maxbits-n) prefixes (100 /24s
// in a /8: at most 1,600; fewer, as they share upper levels).
func prefixesLeft(within netip.Prefix, taken []netip.Prefix) []netip.Prefix {
	within = within.Masked()
	first, last := within.Addr(), lastAddr(within)
	var ranges [][2]netip.Addr
	for _, p := range taken {
		if !p.Overlaps(within) { // also false across families
			continue
		}
		p = p.Masked()
		lo, hi := p.Addr(), lastAddr(p)
		if lo.Less(first) {
			lo = first
		}
		if last.Less(hi) {
			hi = last
		}
		ranges = append(ranges, [2]netip.Addr{lo, hi})
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i][0].Less(ranges[j][0]) })
	var out []netip.Prefix
	next := first // first address not covered so far
	for _, r := range ranges {
		if next.Less(r[0]) {
			out = append(out, rangePrefixes(next, r[0].Prev())...)
		}
		if !r[1].Less(next) {
			if r[1] == last {
				return out
			}
			next = r[1].Next()
		}
	}
	return append(out, rangePrefixes(next, last)...)
}

// rangePrefixes cuts the addresses first..last into the fewest aligned prefixes.
func rangePrefixes(first, last netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for {
		bits := 0
		for ; bits < first.BitLen(); bits++ {
			p := netip.PrefixFrom(first, bits)
			if p.Masked().Addr() == first && !last.Less(lastAddr(p)) {
				break
			}
		}
		p := netip.PrefixFrom(first, bits)
		out = append(out, p)
		end := lastAddr(p)
		if end == last {
			return out
		}
		first = end.Next()
	}
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
