package cni

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/kovn/kovn/pkg/hostnet"
)

// checkPodIf verifies, from inside the pod's namespace, that the pod interface is what
// configurePodIf makes of spec.
func checkPodIf(spec *vethSpec) error {
	link, err := netlink.LinkByName(spec.podIf)
	if err != nil {
		return fmt.Errorf("interface %s is missing in the pod: %w", spec.podIf, err)
	}
	if err := checkLink(link, spec.mtu); err != nil {
		return fmt.Errorf("pod interface %s: %w", spec.podIf, err)
	}
	if !bytes.Equal(link.Attrs().HardwareAddr, spec.mac) {
		return fmt.Errorf("pod interface %s has MAC %s, want %s", spec.podIf, link.Attrs().HardwareAddr, spec.mac)
	}
	addrs, err := hostnet.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("listing addresses of %s in the pod: %w", spec.podIf, err)
	}
	for _, ip := range spec.ips {
		if !hasAddr(addrs, ip) {
			return fmt.Errorf("pod interface %s lacks address %s", spec.podIf, ip)
		}
	}
	routes, err := hostnet.RouteList(link, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("listing routes of %s in the pod: %w", spec.podIf, err)
	}
	for _, r := range spec.routes {
		if !hasRoute(routes, r) {
			return fmt.Errorf("pod lacks route to %s via %s on %s", r.Dst, routeVia(r), spec.podIf)
		}
	}
	return nil
}

// checkHostVeth verifies the node end of the pair (calling thread's namespace).
func checkHostVeth(spec *vethSpec) error {
	link, err := netlink.LinkByName(spec.hostIf)
	if err != nil {
		return fmt.Errorf("node-side veth %s is missing: %w", spec.hostIf, err)
	}
	if err := checkLink(link, spec.mtu); err != nil {
		return fmt.Errorf("node-side veth %s: %w", spec.hostIf, err)
	}
	return nil
}

// checkLink checks what both veth ends share: type, state, MTU and TX checksum off.
func checkLink(link netlink.Link, mtu int) error {
	attrs := link.Attrs()
	if link.Type() != "veth" {
		return fmt.Errorf("is a %s link, not a veth", link.Type())
	}
	if attrs.Flags&net.FlagUp == 0 {
		return fmt.Errorf("is down")
	}
	if attrs.MTU != mtu {
		return fmt.Errorf("has MTU %d, want %d", attrs.MTU, mtu)
	}
	on, err := hostnet.TxChecksum(attrs.Name)
	if err != nil {
		return err
	}
	if on {
		return fmt.Errorf("has TX checksum offload on; the userspace OVS datapath needs it off")
	}
	return nil
}

// hasAddr reports whether addrs contains ip with its prefix length.
func hasAddr(addrs []netlink.Addr, ip netip.Prefix) bool {
	for _, a := range addrs {
		if a.IPNet == nil {
			continue
		}
		got, ok := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if ok && got.Unmap() == ip.Addr() && ones == ip.Bits() {
			return true
		}
	}
	return false
}

// hasRoute reports whether routes contains r (same destination, same next hop).
func hasRoute(routes []netlink.Route, r Route) bool {
	want := r.Dst.Masked()
	for _, nr := range routes {
		if routeDst(nr, want.Addr().Is4()) != want {
			continue
		}
		gw, _ := netip.AddrFromSlice(nr.Gw)
		if gw.Unmap() == r.Gateway {
			return true
		}
	}
	return false
}

// routeDst is nr's destination as a prefix; a nil Dst is the default route of nr's family
// (is4 tells which one was asked for when netlink leaves the family out).
func routeDst(nr netlink.Route, is4 bool) netip.Prefix {
	if nr.Dst == nil {
		if nr.Family == netlink.FAMILY_V6 || (nr.Family == 0 && !is4) {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	addr, ok := netip.AddrFromSlice(nr.Dst.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := nr.Dst.Mask.Size()
	return netip.PrefixFrom(addr.Unmap(), ones).Masked()
}
