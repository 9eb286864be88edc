package bgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
)

// routerPeer is a plain GoBGP server standing in for a ToR: it listens on loopback and accepts
// the speaker as a neighbour. (The e2e tests use FRR; this one checks the driver's logic.)
func routerPeer(t *testing.T, ctx context.Context, addr string, speakerASN uint32) (*server.BgpServer, uint16) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("no %s loopback to run a router on: %v", addr, err)
	}
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	s := server.NewBgpServer(server.LoggerOption(&lastErrors{log: logr.Discard(), byPeer: map[string]string{}}))
	go s.Serve()
	t.Cleanup(s.Stop)
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64500, RouterId: "10.255.0.1",
		ListenPort: int32(port), ListenAddresses: []string{addr}}}); err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr(addr)
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: addr, PeerAsn: speakerASN},
		Transport: &api.Transport{PassiveMode: true},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: familyOf(a), Enabled: true}}},
	}}); err != nil {
		t.Fatal(err)
	}
	return s, port
}

// learned is what the router holds from the speaker: prefix -> next hop.
func learned(t *testing.T, ctx context.Context, s *server.BgpServer, fam *api.Family) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.ListPath(ctx, &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: fam}, func(d *api.Destination) {
		for _, p := range d.Paths {
			if p.IsWithdraw {
				continue
			}
			out[d.Prefix] = nextHop(p)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func nextHop(p *api.Path) string {
	for _, a := range p.Pattrs {
		var nh api.NextHopAttribute
		if a.UnmarshalTo(&nh) == nil {
			return nh.NextHop
		}
		var mp api.MpReachNLRIAttribute
		if a.UnmarshalTo(&mp) == nil && len(mp.NextHops) > 0 {
			return mp.NextHops[0]
		}
	}
	return ""
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("%s: still %s after 20 s", what, last)
}

// expectRoutes waits until s's table holds exactly want (prefix -> next hop).
func expectRoutes(t *testing.T, ctx context.Context, s *server.BgpServer, fam *api.Family, want map[string]string) {
	t.Helper()
	waitFor(t, "routes in the table", func() (bool, string) {
		got := learned(t, ctx, s, fam)
		same := len(got) == len(want)
		b := ""
		for k, v := range got {
			same = same && want[k] == v
			b += k + " via " + v + "; "
		}
		return same, b
	})
}

// announce makes the router originate prefixes (to the speaker, its only neighbour).
func announce(t *testing.T, ctx context.Context, s *server.BgpServer, prefixes ...string) {
	t.Helper()
	for _, p := range prefixes {
		path, err := apiPath(netip.MustParsePrefix(p))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path}); err != nil {
			t.Fatal(err)
		}
	}
}

// onlyPeer waits until the speaker reports its one session as ok says.
func onlyPeer(t *testing.T, ctx context.Context, g *GoBGP, what string, ok func(PeerState) bool) PeerState {
	t.Helper()
	var st PeerState
	waitFor(t, what, func() (bool, string) {
		states, err := g.PeerStates(ctx)
		if err != nil || len(states) != 1 {
			return false, fmt.Sprintf("states %+v, %v", states, err)
		}
		st = states[0]
		return ok(st), fmt.Sprintf("%+v", st)
	})
	return st
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The driver announces exactly the routes it is given, with the session's own address as next
// hop in each family, withdraws one route without touching the others, and withdraws all on a
// withdrawing stop.
func TestGoBGPAnnouncesExactlyTheDesiredRoutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r4, port4 := routerPeer(t, ctx, "127.0.0.1", 64512)
	r6, port6 := routerPeer(t, ctx, "::1", 64512)
	g := NewGoBGP(logr.Discard(), false)
	global := Global{ASN: 64512, RouterID: netip.MustParseAddr("10.255.0.2"), ListenPort: -1}
	peers := []Peer{
		{Name: "tor4", Address: netip.MustParseAddr("127.0.0.1"), Port: port4, PeerASN: 64500, LocalASN: 64512, HoldTime: 9, Keepalive: 3},
		{Name: "tor6", Address: netip.MustParseAddr("::1"), Port: port6, PeerASN: 64500, LocalASN: 64512, HoldTime: 9, Keepalive: 3},
	}
	if err := g.SetPeers(ctx, global, peers); err != nil {
		t.Fatal(err)
	}
	set := func(ps ...string) {
		var routes []netip.Prefix
		for _, p := range ps {
			routes = append(routes, netip.MustParsePrefix(p))
		}
		if err := g.SetRoutes(ctx, routes); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(r *server.BgpServer, fam *api.Family, want map[string]string) { expectRoutes(t, ctx, r, fam, want) }
	v4, v6 := familyOf(netip.MustParseAddr("10.0.0.1")), familyOf(netip.MustParseAddr("fd00::1"))
	set("10.40.0.0/16", "10.41.0.5/32", "fd00:40::/64")
	expect(r4, v4, map[string]string{"10.40.0.0/16": "127.0.0.1", "10.41.0.5/32": "127.0.0.1"})
	expect(r6, v6, map[string]string{"fd00:40::/64": "::1"})

	set("10.40.0.0/16", "fd00:40::/64") // one withdrawn, the others stay
	expect(r4, v4, map[string]string{"10.40.0.0/16": "127.0.0.1"})
	expect(r6, v6, map[string]string{"fd00:40::/64": "::1"})

	states, err := g.PeerStates(ctx)
	if err != nil || len(states) != 2 {
		t.Fatalf("peer states %+v, %v", states, err)
	}
	for _, st := range states {
		if st.State != "Established" || st.Sent != 1 || st.EstablishedSince.IsZero() || st.LocalAddress != st.Address {
			t.Errorf("peer %s: %+v, want Established with 1 prefix sent from %s", st.Name, st, st.Address)
		}
	}

	if err := g.Stop(ctx, true); err != nil {
		t.Fatal(err)
	}
	expect(r4, v4, map[string]string{})
	expect(r6, v6, map[string]string{})
}

// A wrong peer AS keeps the session down and the reason is reported.
func TestGoBGPReportsWhyASessionIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, port := routerPeer(t, ctx, "127.0.0.1", 64512)
	g := NewGoBGP(logr.Discard(), false)
	defer g.Stop(ctx, true)
	if err := g.SetPeers(ctx, Global{ASN: 64512, RouterID: netip.MustParseAddr("10.255.0.2"), ListenPort: -1}, []Peer{
		{Name: "tor", Address: netip.MustParseAddr("127.0.0.1"), Port: port, PeerASN: 64999, LocalASN: 64512}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an error on the wrong-AS session", func() (bool, string) {
		st, err := g.PeerStates(ctx)
		if err != nil || len(st) != 1 {
			return false, "no state"
		}
		return st[0].State != "Established" && st[0].LastError != "", st[0].State + " / " + st[0].LastError
	})
	st, _ := g.PeerStates(ctx)
	t.Logf("wrong peer AS: %s, %q", st[0].State, st[0].LastError)
}

// The speaker imports nothing: the router's route reaches it (counted as received) and stays
// out of its table, while its own announcement still reaches the router.
func TestGoBGPImportsNothingFromPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, port := routerPeer(t, ctx, "127.0.0.1", 64512)
	announce(t, ctx, r, "10.99.0.0/24")
	g := NewGoBGP(logr.Discard(), false)
	defer g.Stop(ctx, true)
	if err := g.SetRoutes(ctx, []netip.Prefix{netip.MustParsePrefix("10.40.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	if err := g.SetPeers(ctx, Global{ASN: 64512, RouterID: netip.MustParseAddr("10.255.0.2"), ListenPort: -1}, []Peer{
		{Name: "tor", Address: netip.MustParseAddr("127.0.0.1"), Port: port, PeerASN: 64500, LocalASN: 64512, MaxPrefixes: 10}}); err != nil {
		t.Fatal(err)
	}
	v4 := familyOf(netip.MustParseAddr("10.0.0.1"))
	expectRoutes(t, ctx, r, v4, map[string]string{"10.99.0.0/24": "0.0.0.0", "10.40.0.0/16": "127.0.0.1"})
	onlyPeer(t, ctx, g, "the router's route received", func(st PeerState) bool { return st.State == "Established" && st.Received == 1 })
	if got := learned(t, ctx, g.s, v4); !slices.Equal(keys(got), []string{"10.40.0.0/16"}) {
		t.Errorf("the speaker's table holds %v, want only its own 10.40.0.0/16", got)
	}
	if n, err := g.ImportedRoutes(ctx); err != nil || n != 0 {
		t.Errorf("imported routes %d, %v; want 0", n, err)
	}
}

// A peer that sends more than MaxPrefixes gets its session closed and held down, and the
// speaker says at which limit; an unchanged peer (a reconcile) leaves it down, a changed limit
// re-creates the session.
func TestGoBGPHoldsDownAPeerOverItsPrefixLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, port := routerPeer(t, ctx, "127.0.0.1", 64512)
	announce(t, ctx, r, "10.99.0.0/24", "10.99.1.0/24", "10.99.2.0/24")
	g := NewGoBGP(logr.Discard(), false)
	defer g.Stop(ctx, true)
	global := Global{ASN: 64512, RouterID: netip.MustParseAddr("10.255.0.2"), ListenPort: -1}
	peer := Peer{Name: "tor", Address: netip.MustParseAddr("127.0.0.1"), Port: port, PeerASN: 64500, LocalASN: 64512, MaxPrefixes: 2}
	if err := g.SetPeers(ctx, global, []Peer{peer}); err != nil {
		t.Fatal(err)
	}
	heldDown := func(st PeerState) bool { return st.PrefixLimitHit == 2 && st.State != "Established" && st.Flaps == 1 }
	st := onlyPeer(t, ctx, g, "the session held down", heldDown)
	t.Logf("over the limit: %s, %q", st.State, st.LastError)
	if err := g.SetPeers(ctx, global, []Peer{peer}); err != nil {
		t.Fatal(err)
	}
	if st := onlyPeer(t, ctx, g, "the session", func(PeerState) bool { return true }); !heldDown(st) {
		t.Errorf("after a reconcile with the same peer: %+v, want still held down at limit 2 after 1 flap", st)
	}
	peer.MaxPrefixes = 3
	if err := g.SetPeers(ctx, global, []Peer{peer}); err != nil {
		t.Fatal(err)
	}
	onlyPeer(t, ctx, g, "the session back with a limit of 3", func(st PeerState) bool {
		return st.State == "Established" && st.Received == 3 && st.PrefixLimitHit == 0
	})
	if n, err := g.ImportedRoutes(ctx); err != nil || n != 0 {
		t.Errorf("imported routes %d, %v; want 0", n, err)
	}
}
