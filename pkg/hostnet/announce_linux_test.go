package hostnet

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

var (
	annMAC   = net.HardwareAddr{0x0a, 0x58, 0x0a, 0x63, 0x00, 0x01}
	annV4    = netip.MustParseAddr("10.99.0.1")
	annV6    = netip.MustParseAddr("fd00:99::1")
	wrongMAC = net.HardwareAddr{0x0a, 0x58, 0xde, 0xad, 0xbe, 0xef}
)

func TestNeighborAdvertBytes(t *testing.T) {
	got := hex.EncodeToString(neighborAdvert(annV6, annMAC))
	want := "88000000" + // type 136, code 0, checksum left to the kernel
		"20000000" + // flags: Override only
		"fd000099000000000000000000000001" + // target
		"0201" + "0a580a630001" // option 2 (target link-layer address), length 8 bytes
	if got != want {
		t.Errorf("neighbour advertisement\n got %s\nwant %s", got, want)
	}
}

func TestGratuitousARPBytes(t *testing.T) {
	got := hex.EncodeToString(gratuitousARP(annV4, annMAC))
	want := "ffffffffffff" + "0a580a630001" + "0806" + // Ethernet: broadcast from the pod's MAC, ARP
		"0001" + "0800" + "06" + "04" + "0001" + // Ethernet/IPv4, request
		"0a580a630001" + "0a630001" + // sender: the pod
		"000000000000" + "0a630001" // target: zero MAC, the same IP
	if got != want {
		t.Errorf("gratuitous ARP\n got %s\nwant %s", got, want)
	}
}

// annPair is two throwaway namespaces joined by a veth: A (a0, the announcing pod) and B
// (b0, a neighbour that knows A's addresses under a wrong MAC).
type annPair struct {
	a, b   string
	aMAC   net.HardwareAddr
	aNS    netns.NsHandle
	bIndex int
}

func newAnnPair(t *testing.T) *annPair {
	t.Helper()
	p := &annPair{a: newNetNS(t), b: newNetNS(t)}
	bNS, err := netns.GetFromPath(p.b)
	if err != nil {
		t.Fatal(err)
	}
	defer bNS.Close()
	err = WithNetNS(p.a, func() error {
		la := netlink.NewLinkAttrs()
		la.Name, la.HardwareAddr = "a0", annMAC
		veth := &netlink.Veth{LinkAttrs: la, PeerName: "b0", PeerNamespace: netlink.NsFd(bNS)}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		return upWithAddrs("a0", "10.99.0.1/24", "fd00:99::1/64")
	})
	if err == nil {
		err = WithNetNS(p.b, func() error {
			if err := upWithAddrs("b0", "10.99.0.2/24", "fd00:99::2/64"); err != nil {
				return err
			}
			link, err := netlink.LinkByName("b0")
			p.bIndex = link.Attrs().Index
			return err
		})
	}
	if err != nil {
		t.Fatalf("setting up the veth pair: %v", err)
	}
	// IPv6 on a0 (its multicast route among it) is set up only once the kernel's link watcher
	// has seen the carrier that b0 coming up gives it, which it may defer; sending before
	// that fails with "network is unreachable".
	if err := waitMulticastRoute(p.a, "a0"); err != nil {
		t.Fatal(err)
	}
	if p.aNS, err = netns.GetFromPath(p.a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.aNS.Close() })
	p.aMAC = annMAC
	return p
}

// waitMulticastRoute waits up to 3 s until ff02::1 is routable out of ifName in netns path.
func waitMulticastRoute(path, ifName string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := WithNetNS(path, func() error {
			_, err := netlink.RouteGetWithOptions(net.ParseIP("ff02::1"), &netlink.RouteGetOptions{Oif: ifName})
			return err
		})
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// upWithAddrs brings ifName up with addrs (IPv6 without DAD), in the calling thread's netns.
func upWithAddrs(ifName string, addrs ...string) error {
	link, err := netlink.LinkByName(ifName)
	if err != nil {
		return err
	}
	if err := EnableIPv6(ifName); err != nil {
		return err
	}
	for _, a := range addrs {
		if err := netlink.AddrAdd(link, AddrNoDAD(netip.MustParsePrefix(a))); err != nil {
			return err
		}
	}
	return netlink.LinkSetUp(link)
}

// poisonB makes B map A's addresses to wrongMAC, as a neighbour of A's predecessor would.
func (p *annPair) poisonB(t *testing.T, state int) {
	t.Helper()
	err := WithNetNS(p.b, func() error {
		for _, ip := range []netip.Addr{annV4, annV6} {
			family := netlink.FAMILY_V4
			if ip.Is6() {
				family = netlink.FAMILY_V6
			}
			n := &netlink.Neigh{LinkIndex: p.bIndex, Family: family, State: state, IP: ip.AsSlice(), HardwareAddr: wrongMAC}
			if err := netlink.NeighSet(n); err != nil {
				return fmt.Errorf("setting %s -> %s: %w", ip, wrongMAC, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// bNeighbour returns the MAC B has for ip ("" for none).
func (p *annPair) bNeighbour(t *testing.T, ip netip.Addr) string {
	t.Helper()
	var mac string
	err := WithNetNS(p.b, func() error {
		neighs, err := netlink.NeighList(p.bIndex, netlink.FAMILY_ALL)
		for _, n := range neighs {
			if n.IP.Equal(ip.AsSlice()) {
				mac = n.HardwareAddr.String()
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// waitLearned waits up to a second for B to map both of A's addresses to A's MAC.
func (p *annPair) waitLearned(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		v4, v6 := p.bNeighbour(t, annV4), p.bNeighbour(t, annV6)
		if v4 == p.aMAC.String() && v6 == p.aMAC.String() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: B has %s at %q and %s at %q, want both at %s", what, annV4, v4, annV6, v6, p.aMAC)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *annPair) announce(t *testing.T) time.Duration {
	t.Helper()
	ips := []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24"), netip.MustParsePrefix("fd00:99::1/64")}
	start := time.Now()
	// Discard: the repeats may log after the test has ended, which testr does not allow.
	err := AnnounceIn(logr.Discard(), p.aNS, "a0", p.aMAC, ips)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("announcing: %v", err)
	}
	return took
}

// TestAnnounceUpdatesNeighbours: a neighbour holding A's addresses under another MAC, in
// either state the kernel keeps using an entry in, takes A's real MAC from the
// announcement at once (it would otherwise keep the wrong one for seconds).
func TestAnnounceUpdatesNeighbours(t *testing.T) {
	for _, state := range []int{netlink.NUD_STALE, netlink.NUD_REACHABLE} {
		p := newAnnPair(t)
		p.poisonB(t, state)
		if got := p.bNeighbour(t, annV4); got != wrongMAC.String() {
			t.Fatalf("B's entry for %s is %q before announcing, want %s", annV4, got, wrongMAC)
		}
		took := p.announce(t)
		t.Logf("state %#x: AnnounceIn returned after %s", state, took)
		p.waitLearned(t, fmt.Sprintf("after announcing (state %#x)", state))
	}
}

// TestAnnounceRepeats: the announcement goes out announceCount times, announceInterval
// apart, after AnnounceIn has returned; each copy is what the RFCs ask for (NA from the
// announced address to all-nodes with hop limit 255, ARP as built).
func TestAnnounceRepeats(t *testing.T) {
	p := newAnnPair(t)
	var fd int
	if err := WithNetNS(p.b, func() (err error) { fd, err = netnstest.Capture(p.bIndex); return err }); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	p.announce(t)
	arps, nas := netnstest.CollectAnnouncements(t, fd, annV4, annV6, p.aMAC, announceInterval*announceCount+time.Second, announceCount)
	if len(arps) != announceCount || len(nas) != announceCount {
		t.Fatalf("B saw %d gratuitous ARPs and %d neighbour advertisements, want %d each", len(arps), len(nas), announceCount)
	}
	if gap := arps[len(arps)-1].Sub(arps[0]); gap < announceInterval {
		t.Errorf("the announcements came within %s, want them spread over %s", gap, announceInterval*(announceCount-1))
	}
}
