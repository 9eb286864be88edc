package bootstrap

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/kovn/kovn/pkg/hostnet"
)

// RouteProtocol marks the routes kovn-daemon installs ("kovn" in /etc/iproute2/rt_protos if an
// admin names it), so a sync removes exactly its own stale routes and nothing else.
const RouteProtocol = 75

// SyncRoutes makes the node's routes to pod subnets exactly cidrs, each via the join gateway
// of its family on ovn0.
func SyncRoutes(link netlink.Link, cidrs []netip.Prefix, gateways []netip.Addr) error {
	want := map[string]*netlink.Route{}
	for _, c := range cidrs {
		for _, gw := range gateways {
			if gw.Is4() != c.Addr().Is4() {
				continue
			}
			dst := &net.IPNet{IP: c.Masked().Addr().AsSlice(), Mask: net.CIDRMask(c.Bits(), c.Addr().BitLen())}
			want[dst.String()] = &netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Gw: gw.AsSlice(), Protocol: RouteProtocol}
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		cur, err := hostnet.RouteListFiltered(fam, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		for i := range cur {
			if cur[i].Dst == nil || want[cur[i].Dst.String()] == nil {
				if err := netlink.RouteDel(&cur[i]); err != nil {
					return fmt.Errorf("remove stale route %v: %w", cur[i].Dst, err)
				}
			}
		}
	}
	for _, r := range want {
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s via %s dev ovn0: %w", r.Dst, r.Gw, err)
		}
	}
	return nil
}
