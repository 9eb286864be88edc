package ipam

import "net/netip"

// Range is an inclusive range of addresses of one family. The IPAM takes its own type rather
// than the API's IPRange so that it depends on no kovn package: callers convert (the API's
// IPRange has the same fields, so Range(r) does).
type Range struct {
	First, Last netip.Addr
}

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + ".." + r.Last.String()
}

// inPrefix reports whether the whole range lies inside p.
func (r Range) inPrefix(p netip.Prefix) bool {
	return p.Contains(r.First) && p.Contains(r.Last)
}

// prefixRange returns the first and last address of p.
func prefixRange(p netip.Prefix) Range {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(b)
	return Range{First: p.Addr(), Last: last}
}
