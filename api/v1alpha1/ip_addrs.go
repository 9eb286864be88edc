package v1alpha1

import (
	"fmt"
	"net/netip"
)

// Addrs returns the addresses the IP records (IPv4 first), or an error if it records none or
// a malformed one. The controller restores its IPAM from them and networks the owner with them.
func (s *IPSpec) Addrs() ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range []string{s.V4IP, s.V6IP} {
		if v == "" {
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", v)
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no address recorded")
	}
	return out, nil
}

// SetAddrs records addrs, one per family.
func (s *IPSpec) SetAddrs(addrs []netip.Addr) {
	s.V4IP, s.V6IP = "", ""
	for _, a := range addrs {
		if a.Is4() {
			s.V4IP = a.String()
		} else {
			s.V6IP = a.String()
		}
	}
}
