package interconnect

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
)

// This AZ's rows in IC-SB (its gateways with their tunnel endpoints, its transit ports'
// bindings, the routes it advertises) are written by its own ovn-ic, which also rewrites
// them. But OVN-IC's databases let any AZ's certificate write any row, and a row under this
// AZ's name is believed by every peer: a route to one of its subnets via another AZ's transit
// address, or a gateway whose tunnel endpoint is another AZ's node, sends the peers' traffic
// for this cluster elsewhere. So kovn watches its rows (icsbGuard) for what its ovn-ic never
// writes, removes it and reports it as tampering, like its join record (guardRecord).

// ownSettle is how long an address, node or transit address this AZ no longer has still
// counts as its own: its ovn-ic replaces the rows that name it a moment after kovn's pass.
const ownSettle = time.Minute

// ownRows is what this AZ's rows in IC-SB may name, as the last pass knew it.
type ownRows struct {
	az     string // the AZ's name and its Availability_Zone row
	azUUID string
	// nodes are the cluster's nodes (chassis names), nodeIPs their addresses; nexthops the
	// addresses of this AZ's router ports, by transit switch. Each maps to when it stops
	// counting (zero: current).
	nodes    map[string]time.Time
	nodeIPs  map[netip.Addr]time.Time
	nexthops map[string]map[netip.Addr]time.Time
}

func stillOwn[K comparable](m map[K]time.Time, k K, now time.Time) bool {
	until, ok := m[k]
	return ok && (until.IsZero() || now.Before(until))
}

// renew makes current the keys of m, keeps the others ownSettle more (those already
// expiring, until they expire) and forgets the expired.
func renew[K comparable](old map[K]time.Time, current []K, now time.Time) map[K]time.Time {
	out := map[K]time.Time{}
	for k, until := range old {
		switch {
		case until.IsZero():
			out[k] = now.Add(ownSettle)
		case now.Before(until):
			out[k] = until
		}
	}
	for _, k := range current {
		out[k] = time.Time{}
	}
	return out
}

// foreignRow says why m, a row of IC-SB under this AZ's name (or a tunnel endpoint of one
// of its gateways), is none its ovn-ic writes; "" when it may be. A transit switch whose
// addresses are unknown to the last pass is not judged.
func (o *ownRows) foreignRow(m model.Model, now time.Time) string {
	switch row := m.(type) {
	case *icsb.Route:
		nh, err := netip.ParseAddr(row.Nexthop)
		if row.AvailabilityZone != o.azUUID || o.nexthops[row.TransitSwitch] == nil {
			return ""
		}
		if err != nil || !stillOwn(o.nexthops[row.TransitSwitch], nh, now) {
			return fmt.Sprintf("a route to %s via %s on %s (not this AZ's transit address)", row.IPPrefix, row.Nexthop, row.TransitSwitch)
		}
	case *icsb.Gateway:
		if row.AvailabilityZone == o.azUUID && !stillOwn(o.nodes, row.Name, now) {
			return fmt.Sprintf("a gateway %q (no node of this cluster)", row.Name)
		}
	case *icsb.Encap:
		ip, err := netip.ParseAddr(row.IP)
		if stillOwn(o.nodes, row.GatewayName, now) && (err != nil || !stillOwn(o.nodeIPs, ip, now)) {
			return fmt.Sprintf("tunnel endpoint %s of gateway %s (no address of this cluster's nodes)", row.IP, row.GatewayName)
		}
	case *icsb.PortBinding:
		if row.AvailabilityZone == o.azUUID && row.Gateway != "" && !stillOwn(o.nodes, row.Gateway, now) {
			return fmt.Sprintf("the binding of %s to gateway %q (no node of this cluster; ovn-ic rewrites it)", row.LogicalPort, row.Gateway)
		}
	}
	return ""
}

// foundRow is a row foreignRow refused.
type foundRow struct {
	table, uuid, why string
	gateway          string // an Encap's: whose encaps it is in
}

// icsbGuard keeps the last pass's ownRows and the rows the IC-SB cache's events refused
// since: the attacker's row may be gone (its ovn-ic rewrote it) before the next pass looks,
// but it was believed meanwhile, and is reported all the same.
type icsbGuard struct {
	mu   sync.Mutex
	own  *ownRows
	seen map[string]foundRow
}

// inspect is the IC-SB cache's event handler for added and updated rows (each event queues
// a pass already).
func (g *icsbGuard) inspect(table string, m model.Model) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.own == nil {
		return
	}
	if f, ok := found(g.own, table, m, time.Now()); ok {
		if g.seen == nil {
			g.seen = map[string]foundRow{}
		}
		g.seen[f.uuid] = f
	}
}

func found(o *ownRows, table string, m model.Model, now time.Time) (foundRow, bool) {
	why := o.foreignRow(m, now)
	if why == "" {
		return foundRow{}, false
	}
	f := foundRow{table: table, why: why}
	if row, ok := m.(interface{ GetUUID() string }); ok { // every generated model has it
		f.uuid = row.GetUUID()
	}
	return f, f.uuid != ""
}

// update replaces the guard's view of this AZ (keeping what it no longer has for ownSettle)
// and returns what the events refused since the last call.
func (g *icsbGuard) update(az, azUUID string, nodes []string, nodeIPs []netip.Addr, nexthops map[string][]netip.Addr, now time.Time) (*ownRows, []foundRow) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := &ownRows{az: az, azUUID: azUUID, nexthops: map[string]map[netip.Addr]time.Time{}}
	var old ownRows
	if g.own != nil && g.own.az == az {
		old = *g.own
	}
	o.nodes, o.nodeIPs = renew(old.nodes, nodes, now), renew(old.nodeIPs, nodeIPs, now)
	for ts, addrs := range nexthops {
		o.nexthops[ts] = renew(old.nexthops[ts], addrs, now)
	}
	for ts, addrs := range old.nexthops {
		if _, ok := o.nexthops[ts]; !ok {
			o.nexthops[ts] = renew(addrs, nil, now)
		}
	}
	g.own = o
	var seen []foundRow
	for _, f := range g.seen {
		seen = append(seen, f)
	}
	g.seen = nil
	return o, seen
}

// ownNexthops are the addresses of this AZ's router ports on each transit switch (kovn's and
// the ForeignAZs'), from what the pass programs.
func ownNexthops(az string, d Desired) map[string][]netip.Addr {
	shards := []topology.Shard{d.Shard}
	for _, f := range d.Foreign {
		shards = append(shards, f.Shard)
	}
	out := map[string][]netip.Addr{}
	for _, sh := range shards {
		for _, sp := range sh.SwitchPorts {
			lrp := sp.Options["router-port"]
			if sp.Name != SwitchPortName(az, sp.Switch) || lrp == "" {
				continue
			}
			for _, rp := range sh.RouterPorts {
				if rp.Name != lrp {
					continue
				}
				for _, n := range rp.Networks {
					if p, err := netip.ParsePrefix(n); err == nil {
						out[sp.Switch] = append(out[sp.Switch], p.Addr())
					}
				}
			}
		}
	}
	return out
}

// guardICSB finds this AZ's rows in IC-SB its ovn-ic never writes (in the cache now, or seen
// by the events since the last pass), removes those still there (routes and gateways deleted,
// a tunnel endpoint taken out of its gateway; a binding is rewritten by ovn-ic) and reports
// them as tampering: Degraded, an event, kovn_ic_records_restored_total.
func (r *Reconciler) guardICSB(ctx context.Context, run *joinRun, d Desired) error {
	in, now := run.in, time.Now()
	azUUID := ""
	for uuid, name := range run.cs.azName {
		if name == in.AZ {
			azUUID = uuid
		}
	}
	var nodes []string
	for _, n := range run.nodes {
		nodes = append(nodes, n.Name)
	}
	own, seen := r.icsbRows.update(in.AZ, azUUID, nodes, in.NodeIPs, ownNexthops(in.AZ, d), now)
	if azUUID == "" {
		return nil // not in IC-SB yet: nothing is under its name
	}
	present, err := foreignInCache(ctx, run.icsb, own, now)
	if err != nil {
		return err
	}
	all := map[string]foundRow{}
	for _, f := range append(seen, present...) {
		all[f.uuid] = f
	}
	if len(all) == 0 {
		return nil
	}
	if err := removeForeign(ctx, run.icsb, present); err != nil {
		return fmt.Errorf("removing rows under AZ %s another AZ wrote in IC-SB: %w", in.AZ, err)
	}
	var whys []string
	for _, f := range all {
		whys = append(whys, f.why)
	}
	sort.Strings(whys)
	msg := fmt.Sprintf("removed from IC-SB, under AZ %s and not written by its ovn-ic: %s (OVN-IC's databases let any AZ's certificate write them)",
		in.AZ, strings.Join(whys, "; "))
	r.Tamper.Note(len(all), msg)
	if r.Recorder != nil {
		r.Recorder.Event(run.ic, corev1.EventTypeWarning, kovnv1.ReasonRecordTampered, msg)
	}
	r.noteTampering(run.ic, nil)
	return nil
}

// foreignInCache lists the IC-SB cache's rows foreignRow refuses.
func foreignInCache(ctx context.Context, c libovsdb.Client, own *ownRows, now time.Time) ([]foundRow, error) {
	var out []foundRow
	add := func(table string, m model.Model) {
		if f, ok := found(own, table, m, now); ok {
			out = append(out, f)
		}
	}
	var routes []icsb.Route
	var gws []icsb.Gateway
	var encaps []icsb.Encap
	var pbs []icsb.PortBinding
	for _, list := range []any{&routes, &gws, &encaps, &pbs} {
		if err := c.List(ctx, list); err != nil {
			return nil, err
		}
	}
	for i := range routes {
		add(icsb.RouteTable, &routes[i])
	}
	for i := range gws {
		add(icsb.GatewayTable, &gws[i])
	}
	for i := range pbs {
		add(icsb.PortBindingTable, &pbs[i])
	}
	for i := range encaps {
		f, ok := found(own, icsb.EncapTable, &encaps[i], now)
		if !ok {
			continue
		}
		for _, g := range gws {
			if slices.Contains(g.Encaps, f.uuid) {
				f.gateway = g.UUID
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// removeForeign deletes the refused routes and gateways and takes refused tunnel endpoints out
// of their gateways, in one transaction. Bindings are left to ovn-ic, which owns their
// gateway column and rewrites it.
func removeForeign(ctx context.Context, c libovsdb.Client, rows []foundRow) error {
	var ops []ovsdb.Operation
	for _, f := range rows {
		var o []ovsdb.Operation
		var err error
		switch f.table {
		case icsb.RouteTable:
			o, err = c.Where(&icsb.Route{UUID: f.uuid}).Delete()
		case icsb.GatewayTable:
			o, err = c.Where(&icsb.Gateway{UUID: f.uuid}).Delete()
		case icsb.EncapTable:
			if f.gateway == "" {
				continue
			}
			gw := &icsb.Gateway{UUID: f.gateway}
			o, err = c.Where(gw).Mutate(gw, model.Mutation{Field: &gw.Encaps, Mutator: ovsdb.MutateOperationDelete, Value: []string{f.uuid}})
		}
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	if len(ops) == 0 {
		return nil
	}
	res, err := c.Transact(ctx, ops...)
	if err != nil {
		return err
	}
	_, err = ovsdb.CheckOperationResults(res, ops)
	return err
}
