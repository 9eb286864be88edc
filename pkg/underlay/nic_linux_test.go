package underlay

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet"
)

// inThrowawayNetNS runs the test body on a locked thread inside a new network namespace
// (tests run as root), so nothing of the host's network is touched.
func inThrowawayNetNS(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("new netns (tests run as root): %v", err)
	}
	t.Cleanup(func() { _ = netns.Set(orig); ns.Close(); orig.Close(); runtime.UnlockOSThread() })
}

func vethUp(t *testing.T, name string) netlink.Link {
	t.Helper()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{name, name + "p"} {
		p, _ := netlink.LinkByName(n)
		if err := netlink.LinkSetUp(p); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// routesVia lists the destinations routed (not by the kernel) through link, any table.
func routesVia(t *testing.T, link netlink.Link) []string {
	t.Helper()
	cfg, err := ReadNICConfig(link)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range cfg.Routes {
		out = append(out, r.Dst.String()+" via "+r.Gw.String()+" table "+strconv.Itoa(r.Table))
	}
	slices.Sort(out)
	return out
}

// A NIC's addresses and routes (both families, another table too) move to the bridge and back
// exactly; the NIC stops answering ARP and drops IPv6 while the userspace datapath owns it.
func TestMoveAndRestoreNICConfig(t *testing.T) {
	inThrowawayNetNS(t)
	nic, br := vethUp(t, "nic0"), vethUp(t, "br0")
	for _, a := range []string{"192.0.2.10/24", "2001:db8::10/64"} {
		if err := netlink.AddrAdd(nic, hostnet.AddrNoDAD(netip.MustParsePrefix(a))); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		dst, gw string
		table   int
	}{{"198.51.100.0/24", "192.0.2.1", 0}, {"2001:db8:1::/48", "2001:db8::1", 0}, {"203.0.113.0/24", "192.0.2.1", 100}} {
		_, dst, _ := net.ParseCIDR(r.dst)
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: nic.Attrs().Index, Dst: dst, Gw: net.ParseIP(r.gw), Table: r.table}); err != nil {
			t.Fatalf("route %s: %v", r.dst, err)
		}
	}
	cfg, err := ReadNICConfig(nic)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := DecodeNICConfig(cfg.Encode()); !slices.Equal(got.Addrs, cfg.Addrs) || len(got.Routes) != len(cfg.Routes) {
		t.Fatalf("record round trip: %+v != %+v", got, cfg)
	}
	if len(cfg.Addrs) != 2 || len(cfg.Routes) != 3 {
		t.Fatalf("snapshot %+v, want 2 addresses and 3 routes (no kernel or link-local ones)", cfg)
	}
	before := routesVia(t, nic)
	for i := 0; i < 2; i++ { // the second call finds everything done
		if err := MoveConfig(cfg, nic, br, true); err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	if got := routesVia(t, br); !slices.Equal(got, before) {
		t.Errorf("routes on the bridge %v, want %v", got, before)
	}
	if got := routesVia(t, nic); len(got) != 0 {
		t.Errorf("routes left on the NIC: %v", got)
	}
	if left, _ := ReadNICConfig(nic); len(left.Addrs) != 0 {
		t.Errorf("addresses left on the NIC: %v", left.Addrs)
	}
	nic, _ = netlink.LinkByName("nic0")
	if nic.Attrs().RawFlags&unix.IFF_NOARP == 0 {
		t.Error("the NIC still answers ARP")
	}
	if v, _ := os.ReadFile("/proc/sys/net/ipv6/conf/nic0/disable_ipv6"); strings.TrimSpace(string(v)) != "1" {
		t.Errorf("NIC disable_ipv6 = %q, want 1", v)
	}
	if err := RestoreConfig(cfg, nic); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkDel(br); err != nil { // as deleting the OVS bridge does
		t.Fatal(err)
	}
	if got := routesVia(t, nic); !slices.Equal(got, before) {
		t.Errorf("routes back on the NIC %v, want %v", got, before)
	}
	if back, _ := ReadNICConfig(nic); !slices.Equal(back.Addrs, cfg.Addrs) {
		t.Errorf("addresses back on the NIC %v, want %v", back.Addrs, cfg.Addrs)
	}
	nic, _ = netlink.LinkByName("nic0")
	if nic.Attrs().RawFlags&unix.IFF_NOARP != 0 {
		t.Error("the NIC still has ARP off")
	}
}
