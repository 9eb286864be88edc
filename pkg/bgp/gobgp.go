package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/types/known/anypb"
)

// connectRetrySeconds: GoBGP waits 120 s between connection attempts by default, and stays idle
// 30 s after a reset: far too long for a peer that restarted or a node whose address changed.
const (
	connectRetrySeconds   = 3
	idleAfterResetSeconds = 1
)

// GoBGP is a Speaker backed by an embedded GoBGP v3 server.
type GoBGP struct {
	log logr.Logger
	// restarting: this process replaces one that ran before (graceful restart): the first
	// session with each peer says so (LocalRestarting), later ones do not (gobgp#2596).
	restarting bool

	mu      sync.Mutex
	s       *server.BgpServer
	errs    *lastErrors
	global  Global
	started bool
	peers   map[netip.Addr]Peer
	desired []netip.Prefix          // the last SetRoutes, announced as soon as BGP runs
	paths   map[netip.Prefix][]byte // announced prefix -> GoBGP path UUID
	greeted map[netip.Addr]bool     // peers already added once by this process
}

// NewGoBGP starts an embedded GoBGP server (no gRPC listener). restarting says whether this
// process takes over from a speaker that ran on this node moments ago.
func NewGoBGP(log logr.Logger, restarting bool) *GoBGP {
	errs := &lastErrors{log: log, byPeer: map[string]string{}}
	s := server.NewBgpServer(server.LoggerOption(errs))
	go s.Serve()
	return &GoBGP{log: log, restarting: restarting, s: s, errs: errs,
		peers: map[netip.Addr]Peer{}, paths: map[netip.Prefix][]byte{}, greeted: map[netip.Addr]bool{}}
}

func (g *GoBGP) SetPeers(ctx context.Context, global Global, peers []Peer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started && global != g.global {
		g.log.Info("speaker identity changed: restarting BGP", "from", g.global, "to", global)
		if err := g.s.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
			return err
		}
		g.started, g.peers, g.paths = false, map[netip.Addr]Peer{}, map[netip.Prefix][]byte{}
	}
	if !g.started {
		if len(peers) == 0 {
			return nil
		}
		if err := g.s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
			Asn: global.ASN, RouterId: global.RouterID.String(), ListenPort: global.ListenPort}}); err != nil {
			return fmt.Errorf("start BGP: %w", err)
		}
		if err := g.rejectImports(ctx); err != nil {
			return err
		}
		g.started, g.global = true, global
		// The routes go in before any session: a peer never sees a start without them (after
		// a graceful restart, an end-of-RIB without them would withdraw them).
		if err := g.applyRoutes(ctx); err != nil {
			return err
		}
	}
	want := map[netip.Addr]Peer{}
	for _, p := range peers {
		want[p.Address] = p
	}
	for addr, have := range g.peers {
		if w, ok := want[addr]; ok && w == have {
			continue
		}
		if err := g.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			return fmt.Errorf("remove peer %s: %w", addr, err)
		}
		delete(g.peers, addr)
	}
	for addr, p := range want {
		if _, ok := g.peers[addr]; ok {
			continue
		}
		localRestarting := g.restarting && p.GracefulRestart && !g.greeted[addr]
		if err := g.s.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p, localRestarting)}); err != nil {
			return fmt.Errorf("add peer %s (%s): %w", addr, p.Name, err)
		}
		g.peers[addr], g.greeted[addr] = p, true
	}
	return nil
}

// importPolicy accepts the routes this speaker originates and nothing else.
const importPolicy = "kovn-originated-only"

// rejectImports makes GoBGP keep no route a peer sends: kovn announces, it does not learn, so a
// router cannot steer a node's speaker (GoBGP's default imports everything, and would pass a
// route from one peer on to the others). The global import policy also sees the routes this
// speaker originates, hence the one statement that lets those through. It must be in place
// before the first peer: StartBgp starts with an empty policy.
func (g *GoBGP) rejectImports(ctx context.Context) error {
	policy := &api.Policy{Name: importPolicy, Statements: []*api.Statement{{
		Name:       importPolicy + "-local",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ACCEPT},
	}}}
	if err := g.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: policy}); err != nil {
		return fmt.Errorf("import policy: %w", err)
	}
	if err := g.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_IMPORT, Policies: []*api.Policy{{Name: importPolicy}},
		DefaultAction: api.RouteAction_REJECT,
	}}); err != nil {
		return fmt.Errorf("import policy assignment: %w", err)
	}
	return nil
}

// apiPeer is GoBGP's form of p. The session carries p's address family only, so the next hop
// GoBGP derives from the session (its local address) always fits the prefixes, and the prefix
// limit of that one family is the session's. Past the limit GoBGP sends a Cease and holds the
// session idle (admin state PFX_CT, no reconnect) until the peer is re-created: a changed
// BgpPeer, or a restarted speaker.
func apiPeer(p Peer, localRestarting bool) *api.Peer {
	fam := familyOf(p.Address)
	afi := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: fam, Enabled: true},
		PrefixLimits: &api.PrefixLimit{Family: fam, MaxPrefixes: p.MaxPrefixes}}
	out := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.PeerASN, LocalAsn: p.LocalASN,
			AuthPassword: p.Password, Description: p.Name},
		Timers: &api.Timers{Config: &api.TimersConfig{ConnectRetry: connectRetrySeconds, HoldTime: p.HoldTime,
			KeepaliveInterval: p.Keepalive, IdleHoldTimeAfterReset: idleAfterResetSeconds}},
		Transport: &api.Transport{PassiveMode: p.Passive, RemotePort: uint32(p.Port)},
		AfiSafis:  []*api.AfiSafi{afi},
	}
	if p.MultihopTTL > 0 {
		out.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: p.MultihopTTL}
	}
	if p.GracefulRestart {
		out.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: p.RestartTime, LocalRestarting: localRestarting}
		afi.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
	}
	return out
}

func familyOf(a netip.Addr) *api.Family {
	if a.Is4() {
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

func (g *GoBGP) SetRoutes(ctx context.Context, routes []netip.Prefix) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.desired = append([]netip.Prefix(nil), routes...)
	if !g.started {
		return nil // no peer yet: SetPeers starts the server and announces them first
	}
	return g.applyRoutes(ctx)
}

// applyRoutes makes GoBGP's locally originated paths g.desired.
func (g *GoBGP) applyRoutes(ctx context.Context) error {
	want := map[netip.Prefix]bool{}
	for _, p := range g.desired {
		want[p.Masked()] = true
	}
	for p, uuid := range g.paths {
		if want[p] {
			continue
		}
		// Always by UUID: a DeletePath with neither a path nor a UUID withdraws every route.
		if len(uuid) == 0 {
			return fmt.Errorf("withdraw %s: no path id recorded", p)
		}
		if err := g.s.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Uuid: uuid}); err != nil {
			return fmt.Errorf("withdraw %s: %w", p, err)
		}
		delete(g.paths, p)
	}
	for p := range want {
		if _, ok := g.paths[p]; ok {
			continue
		}
		path, err := apiPath(p)
		if err != nil {
			return err
		}
		resp, err := g.s.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
		if err != nil {
			return fmt.Errorf("announce %s: %w", p, err)
		}
		g.paths[p] = resp.Uuid
	}
	return nil
}

// apiPath is a locally originated route to p with an unspecified next hop, which GoBGP
// replaces per session with the session's local address.
func apiPath(p netip.Prefix) (*api.Path, error) {
	nlri, err := anypb.New(&api.IPAddressPrefix{PrefixLen: uint32(p.Bits()), Prefix: p.Addr().String()})
	if err != nil {
		return nil, err
	}
	origin, err := anypb.New(&api.OriginAttribute{Origin: 0}) // IGP
	if err != nil {
		return nil, err
	}
	fam := familyOf(p.Addr())
	var nh *anypb.Any
	if p.Addr().Is4() {
		nh, err = anypb.New(&api.NextHopAttribute{NextHop: "0.0.0.0"})
	} else {
		nh, err = anypb.New(&api.MpReachNLRIAttribute{Family: fam, NextHops: []string{"::"}, Nlris: []*anypb.Any{nlri}})
	}
	if err != nil {
		return nil, err
	}
	return &api.Path{Family: fam, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh}}, nil
}

func (g *GoBGP) PeerStates(ctx context.Context) ([]PeerState, error) {
	g.mu.Lock()
	configured := map[string]Peer{}
	for a, p := range g.peers {
		configured[a.String()] = p
	}
	started := g.started
	g.mu.Unlock()
	if !started {
		return nil, nil
	}
	var out []PeerState
	err := g.s.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		st := PeerState{State: "Idle"}
		if p.Conf != nil {
			st.Address, _ = netip.ParseAddr(p.Conf.NeighborAddress)
			st.Name = configured[p.Conf.NeighborAddress].Name
		}
		if p.State != nil {
			st.State = sessionState(p.State.SessionState)
			st.Flaps = p.State.Flops
			if p.State.AdminState == api.PeerState_PFX_CT {
				st.PrefixLimitHit = configured[p.Conf.GetNeighborAddress()].MaxPrefixes
			}
		}
		if p.Transport != nil {
			st.LocalAddress, _ = netip.ParseAddr(p.Transport.LocalAddress)
		}
		if st.State == "Established" && p.Timers != nil && p.Timers.State != nil && p.Timers.State.Uptime != nil {
			st.EstablishedSince = p.Timers.State.Uptime.AsTime()
		}
		for _, af := range p.AfiSafis {
			if af.State != nil {
				st.Sent += af.State.Advertised
				st.Received += af.State.Received
			}
		}
		st.LastError = g.errs.get(st.Address.String())
		out = append(out, st)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Address.Less(out[j].Address) })
	return out, err
}

func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_CONNECT:
		return "Connect"
	case api.PeerState_ACTIVE:
		return "Active"
	case api.PeerState_OPENSENT:
		return "OpenSent"
	case api.PeerState_OPENCONFIRM:
		return "OpenConfirm"
	case api.PeerState_ESTABLISHED:
		return "Established"
	}
	return "Idle"
}

// ImportedRoutes is every path in GoBGP's table but the ones this speaker originates.
func (g *GoBGP) ImportedRoutes(ctx context.Context) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		return 0, nil
	}
	all := 0
	for _, probe := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		t, err := g.s.GetTable(ctx, &api.GetTableRequest{TableType: api.TableType_GLOBAL, Family: familyOf(probe)})
		if err != nil {
			return 0, err
		}
		all += int(t.NumPath)
	}
	return all - len(g.paths), nil
}

func (g *GoBGP) ResetSessionsFrom(ctx context.Context, isLocal func(netip.Addr) bool) error {
	states, err := g.PeerStates(ctx)
	if err != nil {
		return err
	}
	for _, st := range states {
		if st.State != "Established" || !st.LocalAddress.IsValid() || isLocal(st.LocalAddress) {
			continue
		}
		g.log.Info("session runs from an address the node no longer has: resetting it", "peer", st.Address, "local", st.LocalAddress)
		if err := g.s.ResetPeer(ctx, &api.ResetPeerRequest{Address: st.Address.String(), Communication: "local address gone"}); err != nil {
			return err
		}
	}
	return nil
}

func (g *GoBGP) Stop(ctx context.Context, withdraw bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !withdraw {
		// No NOTIFICATION: the process exits and the kernel closes the sockets, which a peer
		// with graceful restart treats as a restart (RFC 4724), keeping the routes.
		return nil
	}
	var errs []string
	for p, uuid := range g.paths {
		if len(uuid) == 0 {
			continue
		}
		if err := g.s.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Uuid: uuid}); err != nil {
			errs = append(errs, fmt.Sprintf("withdraw %s: %v", p, err))
		}
	}
	g.paths = map[netip.Prefix][]byte{}
	if g.started {
		if err := g.s.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
			errs = append(errs, err.Error())
		}
		g.started = false
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// lastErrors is GoBGP's logger: it passes messages on to logr and remembers, per peer, the
// last one that explains a session that is not up (a NOTIFICATION sent or received, a
// connection that failed, why the session went down), for the BgpPeer status.
type lastErrors struct {
	log    logr.Logger
	mu     sync.Mutex
	byPeer map[string]string
	level  gobgplog.LogLevel
}

func (l *lastErrors) get(peer string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byPeer[peer]
}

func (l *lastErrors) record(msg string, f gobgplog.Fields) {
	key, _ := f["Key"].(string)
	if key == "" || f["Topic"] != "Peer" {
		return
	}
	var parts []string
	for _, k := range []string{"Reason", "Code", "Subcode", "Communicated-Reason", "Data", "Error"} {
		if v, ok := f[k]; ok && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s %v", strings.ToLower(k), v))
		}
	}
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, ", ")
	}
	l.mu.Lock()
	l.byPeer[key] = msg
	l.mu.Unlock()
}

func (l *lastErrors) Panic(msg string, f gobgplog.Fields) { l.log.Error(nil, msg, "fields", f) }
func (l *lastErrors) Fatal(msg string, f gobgplog.Fields) { l.log.Error(nil, msg, "fields", f) }
func (l *lastErrors) Error(msg string, f gobgplog.Fields) {
	l.record(msg, f)
	l.log.Error(nil, msg, "fields", f)
}
func (l *lastErrors) Warn(msg string, f gobgplog.Fields) {
	l.record(msg, f)
	l.log.Info(msg, "fields", f)
}
func (l *lastErrors) Info(msg string, f gobgplog.Fields) {
	if msg == "Peer Down" {
		l.record("session down", f)
	}
	l.log.V(1).Info(msg, "fields", f)
}
func (l *lastErrors) Debug(msg string, f gobgplog.Fields) {
	if strings.HasPrefix(msg, "failed to connect") {
		l.record("cannot connect", f)
	}
	l.log.V(2).Info(msg, "fields", f)
}
func (l *lastErrors) SetLevel(level gobgplog.LogLevel) { l.level = level }
func (l *lastErrors) GetLevel() gobgplog.LogLevel      { return gobgplog.DebugLevel }
