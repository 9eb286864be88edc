package bgp

import (
	"context"
	"net/netip"
	"time"
)

// Speaker is all kovn-speaker asks of a BGP implementation. GoBGP v3 sits behind it (gobgp.go is
// the only file that imports GoBGP), so moving to v4 touches one file. Both setters are
// level-triggered: they take the whole desired set and make the speaker match it.
type Speaker interface {
	// SetPeers makes the sessions those of peers: new ones added, changed ones re-created,
	// missing ones removed. global is the speaker's identity; a change restarts the speaker.
	SetPeers(ctx context.Context, global Global, peers []Peer) error
	// SetRoutes makes the announced prefixes exactly routes. The next hop is left to each
	// session (its own local address), so it is never stale.
	SetRoutes(ctx context.Context, routes []netip.Prefix) error
	// PeerStates reports each configured session.
	PeerStates(ctx context.Context) ([]PeerState, error)
	// ImportedRoutes counts the routes the speaker took from its peers into its own table: 0,
	// since it imports nothing (a check that the import policy holds, for the metrics).
	ImportedRoutes(ctx context.Context) (int, error)
	// ResetSessionsFrom tears down sessions whose local address is no longer the node's
	// (isLocal false), so they reconnect from the current address at once instead of waiting
	// for the hold timer.
	ResetSessionsFrom(ctx context.Context, isLocal func(netip.Addr) bool) error
	// Stop ends the speaker. withdraw true: every route is withdrawn and the sessions closed
	// with a NOTIFICATION, so peers forget the node at once. withdraw false: the sessions just
	// drop, so peers with graceful restart keep forwarding until the speaker is back.
	Stop(ctx context.Context, withdraw bool) error
}

// Global is the speaker's own identity.
type Global struct {
	ASN      uint32
	RouterID netip.Addr
	// ListenPort is 179 when a peer is passive (it connects to us), -1 for no listener.
	ListenPort int32
}

// Peer is one session's configuration.
type Peer struct {
	Name     string // the BgpPeer it comes from
	Address  netip.Addr
	Port     uint16
	PeerASN  uint32
	LocalASN uint32
	// HoldTime and Keepalive in seconds; 0 means BGP's defaults.
	HoldTime, Keepalive uint64
	Password            string
	MultihopTTL         uint32 // 0: directly connected
	Passive             bool
	GracefulRestart     bool
	RestartTime         uint32 // seconds
	// MaxPrefixes the peer may send over the session (received, before any policy); beyond
	// it the session is closed and held down.
	MaxPrefixes uint32
}

// PeerState is one session as the speaker sees it.
type PeerState struct {
	Name             string
	Address          netip.Addr
	State            string // Idle, Connect, Active, OpenSent, OpenConfirm, Established
	LocalAddress     netip.Addr
	EstablishedSince time.Time // zero unless Established
	Sent, Received   uint64    // prefixes
	LastError        string
	Flaps            uint32 // times the session went down from Established
	// PrefixLimitHit is the MaxPrefixes the peer exceeded, while the session is held down for
	// it; 0 otherwise.
	PrefixLimitHit uint32
}
