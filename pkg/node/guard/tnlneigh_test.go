package guard

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

func TestParseTunnelNeighbours(t *testing.T) {
	out := "IP                                            MAC                 Bridge\n" +
		"==========================================================================\n" +
		"172.30.2.11                                   ce:d2:f3:21:f7:4e   br-phy\n" +
		"10.16.0.3                                     0a:58:0a:10:00:03   br-int\n" +
		"172.30.3.11                                   f6:9e:79:a6:2f:41   br-phy STALE\n" +
		"fd00:30::4:11                                 52:1f:25:2a:86:4e   br-phy\n"
	got := parseTunnelNeighbours(out)
	want := map[string]string{"172.30.2.11": "ce:d2:f3:21:f7:4e", "10.16.0.3": "0a:58:0a:10:00:03", "fd00:30::4:11": "52:1f:25:2a:86:4e"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v (an expired entry is not OVS's)", got, want)
	}
	for ip, mac := range want {
		if n := got[netip.MustParseAddr(ip)]; n.MAC != mac {
			t.Errorf("%s: %+v, want %s", ip, n, mac)
		}
	}
}

func TestTunnelNeighbourPlan(t *testing.T) {
	hop := func(ip string) tunnelNeighbour { return tunnelNeighbour{Bridge: "br-phy", IP: netip.MustParseAddr(ip)} }
	a, b, c, d, e := hop("172.30.2.11"), hop("172.30.3.11"), hop("172.30.4.11"), hop("172.30.5.11"), hop("172.30.6.11")
	inOVS := map[netip.Addr]tunnelNeighbour{
		a.IP: {Bridge: "br-phy", IP: a.IP, MAC: "02:00:00:00:00:0a"}, // agrees with the kernel
		d.IP: {Bridge: "br-phy", IP: d.IP, MAC: "02:00:00:00:00:0d"}, // the kernel confirmed another MAC
		e.IP: {Bridge: "br-phy", IP: e.IP, MAC: "02:00:00:00:00:0e"}, // the kernel has an unconfirmed other MAC
	}
	kernel := map[netip.Addr]kernelNeighbour{
		a.IP: {MAC: "02:00:00:00:00:0a", State: unix.NUD_REACHABLE},
		b.IP: {MAC: "02:00:00:00:00:0b", State: unix.NUD_STALE}, // OVS has none: use it, and re-confirm
		// c: neither has it: resolve
		d.IP: {MAC: "02:00:00:00:00:dd", State: unix.NUD_REACHABLE},
		e.IP: {MAC: "02:00:00:00:00:ee", State: unix.NUD_STALE},
	}
	set, resolve := tunnelNeighbourPlan([]tunnelNeighbour{a, b, c, d, e}, inOVS, kernel)
	wantSet := []tunnelNeighbour{{Bridge: "br-phy", IP: b.IP, MAC: "02:00:00:00:00:0b"}, {Bridge: "br-phy", IP: d.IP, MAC: "02:00:00:00:00:dd"}}
	if !slices.Equal(set, wantSet) {
		t.Errorf("set %v, want %v", set, wantSet)
	}
	if wantResolve := []tunnelNeighbour{b, c}; !slices.Equal(resolve, wantResolve) {
		t.Errorf("resolve %v, want %v", resolve, wantResolve)
	}
}

// The kernel side in two throwaway netns joined by a veth (root): resolveKernelNeighbour makes
// the kernel ARP for a peer it never talked to, and lookupKernelNeighbour reads the answer.
func TestResolveKernelNeighbour(t *testing.T) {
	netnstest.Do(t, func() {
		hereNS, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer hereNS.Close()
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "br-fab"}, PeerName: "peer0"}); err != nil {
			t.Fatal(err)
		}
		peerNS, err := netns.New() // the thread is in it now
		if err != nil {
			t.Fatal(err)
		}
		defer peerNS.Close()
		_ = netns.Set(hereNS)
		peer, _ := netlink.LinkByName("peer0")
		if err := netlink.LinkSetNsFd(peer, int(peerNS)); err != nil {
			t.Fatal(err)
		}
		linkUp(t, "br-fab", "10.9.0.1/24")
		_ = netns.Set(peerNS)
		peerMAC := linkUp(t, "peer0", "10.9.0.2/24").Attrs().HardwareAddr.String()
		_ = netns.Set(hereNS)

		fab := linkIndex(t, "br-fab")
		h := tunnelNeighbour{Bridge: "br-fab", Link: fab, IP: netip.MustParseAddr("10.9.0.2")}
		lookupKernelNeighbour := func(h tunnelNeighbour) kernelNeighbour {
			table, err := kernelNeighbours()
			if err != nil {
				t.Fatal(err)
			}
			return table[kernelNeighbourKey{h.Link, h.IP}]
		}
		if n := lookupKernelNeighbour(h); n.MAC != "" {
			t.Fatalf("before: the kernel knows %+v already", n)
		}
		if err := resolveKernelNeighbour(h); err != nil {
			t.Fatal(err)
		}
		var n kernelNeighbour
		for i := 0; i < 20 && n.State != unix.NUD_REACHABLE; i++ {
			time.Sleep(50 * time.Millisecond)
			n = lookupKernelNeighbour(h)
		}
		if n.MAC != peerMAC || n.State != unix.NUD_REACHABLE {
			t.Fatalf("after NTF_USE: %+v, want %s REACHABLE", n, peerMAC)
		}
	})
}

// linkUp gives link name (in this thread's netns) the address cidr and sets it up.
func linkUp(t *testing.T, name, cidr string) netlink.Link {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr(cidr)
	if err := netlink.AddrAdd(l, addr); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	return l
}

func linkIndex(t *testing.T, name string) int {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}
