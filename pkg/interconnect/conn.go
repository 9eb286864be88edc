package interconnect

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// icConn holds the clients of the IC databases the InterConnect names; a change of endpoints
// reconnects, so the IC databases can move at run time.
type icConn struct {
	mu         sync.Mutex
	nbEps      []string
	sbEps      []string
	icnb, icsb libovsdb.Client
	// nbLive, sbLive: whether each database answers, echoed every ovn.LivenessInterval.
	nbLive, sbLive *ovn.Liveness
	stopProbe      context.CancelFunc
	// wanted: an InterConnect names IC databases (set before the first attempt, so an
	// unreachable database shows as down rather than absent).
	wanted bool
	// inspect, if set, sees every row added to or updated in the IC-SB cache (icsbGuard).
	inspect func(table string, m model.Model)
}

// state reports whether each IC database is connected, and whether any is wanted.
func (c *icConn) state() (nb, sb, wanted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nbLive.Answers(), c.sbLive.Answers(), c.wanted
}

// connect returns clients for the endpoints, reusing the current ones when unchanged. Changes
// in either database are sent to events (non-blocking: one pending event is enough to re-queue).
// creds (nil for tcp: endpoints) is read on every handshake, so a renewed certificate needs no
// reconnect of its own.
func (c *icConn) connect(ctx context.Context, nbEps, sbEps []string, creds ovn.CredentialSource, events chan<- event.GenericEvent) (libovsdb.Client, libovsdb.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.icnb != nil && slices.Equal(nbEps, c.nbEps) && slices.Equal(sbEps, c.sbEps) {
		return c.icnb, c.icsb, nil
	}
	c.closeLocked()
	c.wanted = true
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	log := ctrl.Log.WithName("interconnect")
	icnb, err := ovn.ConnectICNB(ctx, ovn.Config{Endpoints: nbEps, LeaderOnly: true, Logger: log.WithName("ic-nb"),
		MaxRetryInterval: 2 * time.Second, Credentials: creds})
	if err != nil {
		return nil, nil, err
	}
	icsb, err := ovn.ConnectICSB(ctx, ovn.Config{Endpoints: sbEps, Logger: log.WithName("ic-sb"), MaxRetryInterval: 2 * time.Second,
		Credentials: creds})
	if err != nil {
		icnb.Close()
		return nil, nil, err
	}
	kick := func() {
		if events == nil {
			return
		}
		select {
		case events <- event.GenericEvent{Object: &kovnv1.InterConnect{}}:
		default:
		}
	}
	// IC-SB: peers, routes, gateway bindings; IC-NB: join records and withdrawals.
	for _, db := range []libovsdb.Client{icsb, icnb} {
		inspect := func(string, model.Model) {}
		if db == icsb && c.inspect != nil {
			inspect = c.inspect
		}
		db.Cache().AddEventHandler(&cache.EventHandlerFuncs{
			AddFunc:    func(table string, m model.Model) { inspect(table, m); kick() },
			UpdateFunc: func(table string, _, m model.Model) { inspect(table, m); kick() },
			DeleteFunc: func(string, model.Model) { kick() },
		})
	}
	c.nbEps, c.sbEps, c.icnb, c.icsb = slices.Clone(nbEps), slices.Clone(sbEps), icnb, icsb
	// A reconnecting libovsdb client raises no event of its own, and the status must say
	// when a database stops or starts answering.
	probeCtx, stop := context.WithCancel(context.Background())
	c.stopProbe = stop
	c.nbLive, c.sbLive = ovn.WatchLiveness(probeCtx, icnb, 0), ovn.WatchLiveness(probeCtx, icsb, 0)
	c.nbLive.OnChange(func(bool) { kick() })
	c.sbLive.OnChange(func(bool) { kick() })
	return icnb, icsb, nil
}

// unanswered names the IC databases that do not answer, with their endpoints.
func (c *icConn) unanswered() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	if !c.nbLive.Answers() {
		out = append(out, fmt.Sprintf("IC-NB %v", c.nbEps))
	}
	if !c.sbLive.Answers() {
		out = append(out, fmt.Sprintf("IC-SB %v", c.sbEps))
	}
	return out
}

func (c *icConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *icConn) closeLocked() {
	if c.stopProbe != nil {
		c.stopProbe()
		c.stopProbe = nil
	}
	if c.icnb != nil {
		c.icnb.Close()
	}
	if c.icsb != nil {
		c.icsb.Close()
	}
	c.icnb, c.icsb, c.nbEps, c.sbEps, c.nbLive, c.sbLive, c.wanted = nil, nil, nil, nil, nil, nil, false
}

func lookupRouterPort(ctx context.Context, c libovsdb.Client, name string) (*nb.LogicalRouterPort, error) {
	lrp := &nb.LogicalRouterPort{Name: name}
	if err := c.Get(ctx, lrp); err != nil {
		return nil, err
	}
	return lrp, nil
}

// transitPortKeys are the tunnel keys ovn-ic gave the AZ's switch ports on the transit
// switches (options:requested-tnl-key), by port name; a port not keyed yet is absent.
func transitPortKeys(ctx context.Context, c libovsdb.Client, az string, switches []string) map[string]string {
	keys := map[string]string{}
	for _, ts := range switches {
		lsp := &nb.LogicalSwitchPort{Name: SwitchPortName(az, ts)}
		if err := c.Get(ctx, lsp); err == nil && lsp.Options["requested-tnl-key"] != "" {
			keys[lsp.Name] = lsp.Options["requested-tnl-key"]
		}
	}
	return keys
}
