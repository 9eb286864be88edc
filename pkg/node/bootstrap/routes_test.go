package bootstrap

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

// TestSyncRoutesKeepsExactlyTheWantedRoutes: the node's kovn routes follow the desired CIDRs
// (a subnet still wanted keeps its route, one gone loses it) and routes kovn did not make stay.
func TestSyncRoutesKeepsExactlyTheWantedRoutes(t *testing.T) {
	netnstest.Do(t, func() {
		ip := netnstest.IPCmd(t)
		// ovn0 stand-in: a veth (no dummy links on this kernel) on the join subnet.
		ip("link", "add", "kv-ovn0", "type", "veth", "peer", "name", "kv-peer")
		ip("addr", "add", "100.64.0.2/16", "dev", "kv-ovn0")
		ip("link", "set", "kv-ovn0", "up")
		ip("link", "set", "kv-peer", "up")
		ip("route", "add", "192.0.2.0/24", "via", "100.64.0.9", "proto", "static")
		link, err := netlink.LinkByName("kv-ovn0")
		if err != nil {
			t.Fatal(err)
		}
		gw := []netip.Addr{netip.MustParseAddr("100.64.0.1")}
		for i := 0; i < 2; i++ { // idempotent
			if err := SyncRoutes(link, prefixes("10.16.0.0/16", "10.200.0.0/24"), gw); err != nil {
				t.Fatal(err)
			}
		}
		got := ip("route", "show")
		for _, want := range []string{"10.16.0.0/16 via 100.64.0.1 dev kv-ovn0 proto 75", "10.200.0.0/24 via 100.64.0.1 dev kv-ovn0 proto 75"} {
			if !strings.Contains(got, want) {
				t.Fatalf("missing %q in:\n%s", want, got)
			}
		}
		if err := SyncRoutes(link, prefixes("10.16.0.0/16"), gw); err != nil { // 10.200.0.0/24 gone
			t.Fatal(err)
		}
		got = ip("route", "show")
		if strings.Contains(got, "10.200.0.0/24") || !strings.Contains(got, "10.16.0.0/16 via 100.64.0.1") ||
			!strings.Contains(got, "192.0.2.0/24 via 100.64.0.9") {
			t.Fatalf("after the subnet went: want 10.16.0.0/16 kept, 10.200.0.0/24 gone, the foreign route kept:\n%s", got)
		}
	})
}

// TestSyncRoutesIPv6: IPv6 pod subnets are routed via the IPv6 join gateway and IPv4 ones via
// the IPv4 gateway, never across families; on an IPv6-only join subnet an IPv6-only node
// routes its IPv6 subnets, and a removed IPv6 subnet loses its route.
func TestSyncRoutesIPv6(t *testing.T) {
	netnstest.Do(t, func() {
		ip := netnstest.IPCmd(t)
		ip("link", "add", "kv-ovn0", "type", "veth", "peer", "name", "kv-peer")
		ip("addr", "add", "100.64.0.2/16", "dev", "kv-ovn0")
		ip("addr", "add", "fd00:100:64::2/112", "dev", "kv-ovn0", "nodad")
		ip("link", "set", "kv-ovn0", "up")
		ip("link", "set", "kv-peer", "up")
		link, err := netlink.LinkByName("kv-ovn0")
		if err != nil {
			t.Fatal(err)
		}
		dual := []netip.Addr{netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("fd00:100:64::1")}
		for i := 0; i < 2; i++ { // idempotent
			if err := SyncRoutes(link, prefixes("10.16.0.0/16", "fd00:10:16::/64", "fd00:20::/64"), dual); err != nil {
				t.Fatal(err)
			}
		}
		v4, v6 := ip("route", "show", "proto", "75"), ip("-6", "route", "show", "proto", "75")
		for _, want := range []string{"fd00:10:16::/64 via fd00:100:64::1 dev kv-ovn0", "fd00:20::/64 via fd00:100:64::1 dev kv-ovn0"} {
			if !strings.Contains(v6, want) {
				t.Errorf("missing %q in:\n%s", want, v6)
			}
		}
		if !strings.Contains(v4, "10.16.0.0/16 via 100.64.0.1 dev kv-ovn0") || strings.Contains(v4, "fd00") {
			t.Errorf("IPv4 routes:\n%s", v4)
		}
		v6only := []netip.Addr{netip.MustParseAddr("fd00:100:64::1")}
		if err := SyncRoutes(link, prefixes("fd00:10:16::/64"), v6only); err != nil { // fd00:20::/64 gone
			t.Fatal(err)
		}
		v4, v6 = ip("route", "show", "proto", "75"), ip("-6", "route", "show", "proto", "75")
		if strings.TrimSpace(v4) != "" || strings.Contains(v6, "fd00:20::") || !strings.Contains(v6, "fd00:10:16::/64 via fd00:100:64::1") {
			t.Errorf("IPv6-only: want only fd00:10:16::/64 via fd00:100:64::1; IPv4:\n%s\nIPv6:\n%s", v4, v6)
		}
	})
}
