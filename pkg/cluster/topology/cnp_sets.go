package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// OVN 23.03 has no "pass" ACL verb, so an Admin-tier Pass rule is compiled away: every
// lower-precedence Admin rule loses the traffic the Pass rule matches (cellMinus). These are
// the sets that takes: switch ports, address prefixes and protocol/port ranges, each
// subtracted in the positive (never OVN's costly negation of a set).

// portRange is lo..hi inclusive.
type portRange struct{ lo, hi int32 }

// l4Protocols are the protocols a rule can name ports of, in rendering order.
var l4Protocols = []string{"tcp", "udp", "sctp"}

// svcSet is a set of traffic by protocol and destination port: ranges per L4 protocol, and
// other for IP traffic of every other protocol (ICMP among them).
type svcSet struct {
	ranges map[string][]portRange
	other  bool
}

func allTraffic() svcSet {
	s := svcSet{ranges: map[string][]portRange{}, other: true}
	for _, p := range l4Protocols {
		s.ranges[p] = []portRange{{0, 65535}}
	}
	return s
}

func (s svcSet) empty() bool {
	if s.other {
		return false
	}
	for _, r := range s.ranges {
		if len(r) > 0 {
			return false
		}
	}
	return true
}

func (s *svcSet) add(proto string, r portRange) {
	if s.ranges == nil {
		s.ranges = map[string][]portRange{}
	}
	s.ranges[proto] = mergeRanges(append(s.ranges[proto], r))
}

// minus is s without what o holds.
func (s svcSet) minus(o svcSet) svcSet {
	out := svcSet{ranges: map[string][]portRange{}, other: s.other && !o.other}
	for _, p := range l4Protocols {
		if left := rangesMinus(s.ranges[p], o.ranges[p]); len(left) > 0 {
			out.ranges[p] = left
		}
	}
	return out
}

// match renders the set as an OVN match clause; "" is every IP packet.
func (s svcSet) match() string {
	var alts []string
	all := true
	for _, p := range l4Protocols {
		rs := s.ranges[p]
		if len(rs) == 1 && rs[0] == (portRange{0, 65535}) {
			alts = append(alts, p)
			continue
		}
		all = false
		for _, r := range rs {
			if r.lo == r.hi {
				alts = append(alts, fmt.Sprintf("%s.dst == %d", p, r.lo))
			} else {
				alts = append(alts, fmt.Sprintf("(%s.dst >= %d && %s.dst <= %d)", p, r.lo, p, r.hi))
			}
		}
	}
	if all && s.other {
		return ""
	}
	if s.other {
		alts = append(alts, otherProtocols)
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " || ") + ")"
}

// otherProtocols matches IP traffic of every protocol but TCP, UDP and SCTP. OVN's ip.proto is
// a nominal field (northd refuses `ip.proto != ...` and `!tcp`), so the others are listed.
var otherProtocols = func() string {
	var b strings.Builder
	b.WriteString("ip.proto == {")
	for p := 0; p < 256; p++ {
		if p == 6 || p == 17 || p == 132 {
			continue
		}
		if b.Len() > len("ip.proto == {") {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", p)
	}
	b.WriteString("}")
	return b.String()
}()

func mergeRanges(rs []portRange) []portRange {
	rs = slices.Clone(rs)
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	var out []portRange
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// rangesMinus is a (merged) without b.
func rangesMinus(a, b []portRange) []portRange {
	out := mergeRanges(a)
	for _, cut := range b {
		var next []portRange
		for _, r := range out {
			if cut.hi < r.lo || cut.lo > r.hi {
				next = append(next, r)
				continue
			}
			if r.lo < cut.lo {
				next = append(next, portRange{r.lo, cut.lo - 1})
			}
			if r.hi > cut.hi {
				next = append(next, portRange{cut.hi + 1, r.hi})
			}
		}
		out = next
	}
	return out
}

// normPrefixes sorts masked prefixes and drops those another one covers.
func normPrefixes(ps []netip.Prefix) []netip.Prefix {
	ps = slices.Clone(ps)
	for i := range ps {
		ps[i] = ps[i].Masked()
	}
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
	var out []netip.Prefix
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].Overlaps(p) && out[n-1].Bits() <= p.Bits() {
			continue // covered by the last kept (sorted by address, shorter first)
		}
		out = append(out, p)
	}
	return out
}

// prefixesAnd is the addresses in both a and b.
func prefixesAnd(a, b []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range a {
		for _, y := range b {
			if !x.Overlaps(y) {
				continue
			}
			if x.Bits() >= y.Bits() {
				out = append(out, x)
			} else {
				out = append(out, y)
			}
		}
	}
	return normPrefixes(out)
}

// prefixesMinus is the addresses of a that b does not hold.
func prefixesMinus(a, b []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range normPrefixes(a) {
		out = append(out, prefixesLeft(x, b)...)
	}
	return normPrefixes(out)
}

// stringsAnd and stringsMinus work on sorted, compacted string sets.
func stringsAnd(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); ok {
			out = append(out, s)
		}
	}
	return out
}

func stringsMinus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); !ok {
			out = append(out, s)
		}
	}
	return out
}

// addrStrings renders family f's prefixes for an address set, a host prefix as its address.
func addrStrings(ps []netip.Prefix, f string) []string {
	out := []string{}
	for _, p := range ps {
		if family(p.Addr()) != f {
			continue
		}
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	sort.Strings(out)
	return out
}
