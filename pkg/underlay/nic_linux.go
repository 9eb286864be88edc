package underlay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet"
)

// NICConfig is what a NIC carried before kovn moved it into a provider bridge: its addresses
// and the routes through it. It is stored with the bridge and given back to the NIC when the
// bridge goes.
type NICConfig struct {
	Addrs  []netip.Prefix `json:"addrs,omitempty"`
	Routes []RouteConfig  `json:"routes,omitempty"`
}

// RouteConfig is one route through the NIC (not the connected routes the kernel derives from
// the addresses).
type RouteConfig struct {
	Dst      netip.Prefix `json:"dst"`
	Gw       netip.Addr   `json:"gw,omitzero"`
	Src      netip.Addr   `json:"src,omitzero"`
	Table    int          `json:"table,omitempty"`
	Priority int          `json:"priority,omitempty"`
	Scope    uint8        `json:"scope,omitempty"`
	Protocol int          `json:"protocol,omitempty"`
}

// Encode is the record stored in the bridge's external_ids.
func (c NICConfig) Encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// DecodeNICConfig reads Encode's output.
func DecodeNICConfig(s string) (NICConfig, error) {
	var c NICConfig
	if s == "" {
		return c, nil
	}
	err := json.Unmarshal([]byte(s), &c)
	return c, err
}

// ReadNICConfig snapshots nic's global addresses and the routes through it, in every table.
// Link-local addresses and kernel-made routes (connected subnets, IPv6 link-local and multicast)
// are left out: the kernel makes them again wherever the addresses go.
func ReadNICConfig(nic netlink.Link) (NICConfig, error) {
	var out NICConfig
	addrs, err := hostnet.AddrList(nic, netlink.FAMILY_ALL)
	if err != nil {
		return out, fmt.Errorf("listing addresses of %s: %w", nic.Attrs().Name, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap().IsLinkLocalUnicast() || a.Scope != int(netlink.SCOPE_UNIVERSE) {
			continue
		}
		ones, _ := a.Mask.Size()
		out.Addrs = append(out.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
	}
	routes, err := hostnet.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: nic.Attrs().Index, Table: unix.RT_TABLE_UNSPEC},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return out, fmt.Errorf("listing routes through %s: %w", nic.Attrs().Name, err)
	}
	for _, r := range routes {
		if rc, ok := routeConfig(r); ok {
			out.Routes = append(out.Routes, rc)
		}
	}
	return out, nil
}

// routeConfig turns a route through the NIC into its record; false for the kernel's own.
func routeConfig(r netlink.Route) (RouteConfig, bool) {
	if r.Protocol == unix.RTPROT_KERNEL || r.Table == unix.RT_TABLE_LOCAL || r.Type != unix.RTN_UNICAST || len(r.MultiPath) > 0 {
		return RouteConfig{}, false
	}
	rc := RouteConfig{Table: r.Table, Priority: r.Priority, Scope: uint8(r.Scope), Protocol: int(r.Protocol)}
	if gw, ok := netip.AddrFromSlice(r.Gw); ok {
		rc.Gw = gw.Unmap()
	}
	if src, ok := netip.AddrFromSlice(r.Src); ok {
		rc.Src = src.Unmap()
	}
	if r.Dst != nil {
		ip, _ := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		rc.Dst = netip.PrefixFrom(ip.Unmap(), ones)
	} else if r.Family == unix.AF_INET6 {
		rc.Dst = netip.MustParsePrefix("::/0")
	} else {
		rc.Dst = netip.MustParsePrefix("0.0.0.0/0")
	}
	if rc.Dst.Addr().Is6() && (rc.Dst.Addr().IsLinkLocalUnicast() || rc.Dst.Addr().IsMulticast()) {
		return RouteConfig{}, false
	}
	return rc, true
}

func (rc RouteConfig) route(linkIndex int) *netlink.Route {
	r := &netlink.Route{LinkIndex: linkIndex, Dst: &net.IPNet{IP: rc.Dst.Addr().AsSlice(), Mask: net.CIDRMask(rc.Dst.Bits(), rc.Dst.Addr().BitLen())},
		Table: rc.Table, Priority: rc.Priority, Scope: netlink.Scope(rc.Scope), Protocol: netlink.RouteProtocol(rc.Protocol)}
	if rc.Gw.IsValid() {
		r.Gw = rc.Gw.AsSlice()
	}
	if rc.Src.IsValid() {
		r.Src = rc.Src.AsSlice()
	}
	return r
}

// MoveConfig puts cfg on to (addresses first, then the routes through it) and then takes the
// addresses off from. The node keeps a path at every step: to carries the addresses before
// the routes move to it, and from loses them only once to holds everything. Idempotent, so a
// move cut short by a restart is finished by the next call. hideFrom is for the userspace
// datapath, where the kernel still sees every frame of a NIC that OVS owns: the NIC then must
// not answer ARP or keep IPv6 state of its own (it would race the bridge's answers).
func MoveConfig(cfg NICConfig, from, to netlink.Link, hideFrom bool) error {
	if err := addAll(to, cfg); err != nil {
		return err
	}
	for _, a := range cfg.Addrs {
		if err := netlink.AddrDel(from, hostnet.AddrNoDAD(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing %s from %s: %w", a, from.Attrs().Name, err)
		}
	}
	if !hideFrom {
		return nil
	}
	if err := netlink.LinkSetARPOff(from); err != nil {
		return fmt.Errorf("turning ARP off on %s: %w", from.Attrs().Name, err)
	}
	return disableIPv6(from.Attrs().Name, true)
}

// RestoreConfig undoes MoveConfig: the NIC answers for itself again and gets cfg back, routes
// included. The bridge is not touched (deleting it removes what it holds).
func RestoreConfig(cfg NICConfig, nic netlink.Link) error {
	if err := disableIPv6(nic.Attrs().Name, false); err != nil {
		return err
	}
	if err := netlink.LinkSetARPOn(nic); err != nil {
		return fmt.Errorf("turning ARP on on %s: %w", nic.Attrs().Name, err)
	}
	return addAll(nic, cfg)
}

// addAll puts cfg's addresses (IPv6 without duplicate address detection: the address was in
// use a moment ago, on this node) and routes on link, and sets it up.
func addAll(link netlink.Link, cfg NICConfig) error {
	name := link.Attrs().Name
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	for _, a := range cfg.Addrs {
		if a.Addr().Is6() {
			if err := hostnet.EnableIPv6(name); err != nil {
				return err
			}
		}
		if err := netlink.AddrReplace(link, hostnet.AddrNoDAD(a)); err != nil {
			return fmt.Errorf("address %s on %s: %w", a, name, err)
		}
	}
	for _, rc := range cfg.Routes {
		if err := netlink.RouteReplace(rc.route(link.Attrs().Index)); err != nil {
			return fmt.Errorf("route %s via %v on %s: %w", rc.Dst, rc.Gw, name, err)
		}
	}
	return nil
}

// disableIPv6 is hostnet.SetDisableIPv6 where a netns without IPv6 has nothing to hide or give back.
func disableIPv6(ifName string, disable bool) error {
	if err := hostnet.SetDisableIPv6(ifName, disable); err != nil && !errors.Is(err, hostnet.ErrNoIPv6) {
		return err
	}
	return nil
}
