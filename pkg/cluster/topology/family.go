package topology

import "net/netip"

// SameFamily returns the first of as in like's family (IPv4 or IPv6), e.g. the next hop for a
// destination, or a router's network on a link. as are addresses or prefixes (a prefix is of
// its address's family).
func SameFamily[T netip.Addr | netip.Prefix](as []T, like netip.Addr) (T, bool) {
	for _, a := range as {
		if familyAddr(a).Is4() == like.Is4() {
			return a, true
		}
	}
	var none T
	return none, false
}

func familyAddr[T netip.Addr | netip.Prefix](v T) netip.Addr {
	if p, ok := any(v).(netip.Prefix); ok {
		return p.Addr()
	}
	return any(v).(netip.Addr)
}
