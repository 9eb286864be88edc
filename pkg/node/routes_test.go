package node

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestSyncRoutesKeepsExactlyTheWantedRoutes: the node's kovn routes follow the desired CIDRs
// (a subnet still wanted keeps its route, one gone loses it) and routes kovn did not make stay.
func TestSyncRoutesKeepsExactlyTheWantedRoutes(t *testing.T) {
	inThrowawayNetNS(t, func() {
		ip := func(args ...string) string {
			out, err := exec.Command("ip", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("ip %v: %v %s", args, err, out)
			}
			return string(out)
		}
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
