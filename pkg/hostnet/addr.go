package hostnet

import (
	"net"
	"net/netip"
)

// IPNet converts p to the *net.IPNet netlink and the CNI types take, keeping the host bits.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
