// Package ovn is kovn's typed access to the OVSDB databases of OVN (NB, SB, IC-NB, IC-SB) and
// Open vSwitch. Everything goes through libovsdb: a client with a monitor-filled cache, and
// small generic helpers that turn desired rows into operations committed in one transaction.
// Nothing here executes ovn-nbctl or ovs-vsctl.
package ovn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Defaults applied by Config for zero values.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultRetryInterval    = 500 * time.Millisecond
	DefaultMaxRetryInterval = 10 * time.Second
)

// Config says how to reach one OVSDB database.
type Config struct {
	// Endpoints in OVSDB connection syntax: "tcp:IP:PORT", "ssl:IP:PORT" or "unix:/path".
	// Several endpoints name the members of a raft cluster; the client uses the first that
	// answers (the leader, with LeaderOnly).
	Endpoints []string
	// LeaderOnly makes the client treat raft followers as down. Writers of NB/IC-NB want
	// this: a follower forwards writes but may serve a stale cache.
	LeaderOnly bool
	// Cert, Key and CACert are PEM files; an endpoint that uses ssl needs them or Credentials.
	Cert, Key, CACert string
	// Credentials, if set, is used instead of the files (certificates kept in memory, such
	// as a Secret's).
	Credentials CredentialSource
	// ServerName, if set, is checked against the server certificate. Empty means
	// "verify the chain against CACert only", which is what ovsdb-server and ovn-controller
	// do: OVN PKI certificates name a role, not the address the database listens on.
	ServerName string
	// ConnectTimeout bounds one connection attempt (dial + schema fetch + leader check).
	ConnectTimeout time.Duration
	// RetryInterval is the first wait between failed attempts; it doubles up to
	// MaxRetryInterval. Used for the initial connect and for reconnects.
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// Logger receives connection progress; the zero value discards.
	Logger logr.Logger
}

// SplitEndpoints splits the comma-separated endpoint list used by OVN's own tools
// ("tcp:10.0.0.1:6641,tcp:10.0.0.2:6641") so flags can take the same syntax.
func SplitEndpoints(s string) []string {
	var eps []string
	for _, ep := range strings.Split(s, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

// Validate checks the configuration without touching the network or the files.
func (c Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("no OVSDB endpoints configured")
	}
	needTLS := false
	for _, ep := range c.Endpoints {
		scheme, err := validateEndpoint(ep)
		if err != nil {
			return err
		}
		needTLS = needTLS || scheme == "ssl"
	}
	if needTLS && c.Credentials == nil && (c.Cert == "" || c.Key == "" || c.CACert == "") {
		return errors.New("ssl OVSDB endpoints need a certificate, a private key and a CA certificate")
	}
	if c.ConnectTimeout < 0 || c.RetryInterval < 0 || c.MaxRetryInterval < 0 {
		return errors.New("OVSDB connect timeout and retry intervals must not be negative")
	}
	return nil
}

// validateEndpoint returns the endpoint's scheme or an error that shows the accepted forms.
func validateEndpoint(ep string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("invalid OVSDB endpoint %q: want tcp:IP:PORT, ssl:IP:PORT or unix:PATH (%s)", ep, why)
	}
	scheme, rest, ok := strings.Cut(ep, ":")
	if !ok {
		return bad("missing scheme")
	}
	switch scheme {
	case "unix":
		// libovsdb silently falls back to its default socket when url.Parse yields no path
		// (relative paths land in url.Opaque), so only absolute paths are accepted.
		if !strings.HasPrefix(rest, "/") {
			return bad("unix socket path must be absolute")
		}
		if u, err := url.Parse(ep); err != nil || u.Path != rest {
			return bad("socket path is not usable as a URL path")
		}
		return scheme, nil
	case "tcp", "ssl":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return bad(err.Error())
		}
		if host == "" {
			return bad("missing address")
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("port must be 1-65535")
		}
		return scheme, nil
	default:
		return bad("unknown scheme " + strconv.Quote(scheme))
	}
}

// withDefaults fills zero durations and a discarding logger.
func (c Config) withDefaults() Config {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.MaxRetryInterval == 0 {
		c.MaxRetryInterval = DefaultMaxRetryInterval
	}
	if c.MaxRetryInterval < c.RetryInterval {
		c.MaxRetryInterval = c.RetryInterval
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	return c
}

// tlsConfig loads the certificate files (and reloads them when they change, see tlsFiles), or
// returns nil when no endpoint uses ssl. An unreadable file is reported here, before any
// connection attempt.
// Credentials not loaded yet are no error here: the handshakes fail (and are retried) until
// they are.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.Credentials != nil {
		return clientTLS(c.Credentials, c.ServerName), nil
	}
	if c.Cert == "" && c.Key == "" && c.CACert == "" {
		return nil, nil
	}
	f := &tlsFiles{cert: c.Cert, key: c.Key, ca: c.CACert}
	if _, _, err := f.Load(); err != nil {
		return nil, err
	}
	return clientTLS(f, c.ServerName), nil
}

// backoff is an exponential backoff with jitter that never gives up. It satisfies
// github.com/cenkalti/backoff/v4's BackOff interface structurally: libovsdb's reconnect loop
// panics when its backoff returns Stop, so an OVN DB that stays down for a long time must
// mean "keep trying", never a crashed controller.
type backoff struct {
	initial, max, next time.Duration
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max, next: initial}
}

// NextBackOff returns the next wait: the current interval ±20% (so many clients that lost
// the same DB do not reconnect in lockstep), then doubles the interval up to max.
func (b *backoff) NextBackOff() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) * 2
	return d - d/5 + jitter
}

// Reset starts again from the initial interval.
func (b *backoff) Reset() { b.next = b.initial }
