package node

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
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
		cur, err := netlink.RouteListFiltered(fam, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
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

// EnableForwarding turns on IPv4/IPv6 forwarding in this network namespace: ovn0 routes pod
// traffic out of the node.
func EnableForwarding() error { return enableForwarding("/proc/sys/net") }

// enableForwarding writes the forwarding sysctls under root (/proc/sys/net). A kernel booted
// without IPv6 (ipv6.disable=1) has no net/ipv6 at all: an IPv4-only node is fine without it,
// and an IPv6 subnet on such a node fails where its addresses are added, naming the cause.
func enableForwarding(root string) error {
	if err := os.WriteFile(filepath.Join(root, "ipv4/ip_forward"), []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "ipv6")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(root, "ipv6/conf/all/forwarding"), []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv6 forwarding: %w", err)
	}
	return nil
}
