// Package nbsync applies a topology.Desired to the OVN northbound database in one
// transaction: rows kovn owns (external_ids kovn.io/owner-type) are created, updated or
// deleted to match; rows of other tools are never touched. Applying an unchanged desired
// state issues no transaction at all.
package nbsync

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Owner types written into external_ids.
const (
	OwnerVpc    = "Vpc"
	OwnerSubnet = "Subnet"
	OwnerPod    = "Pod"
	OwnerNode   = "Node"
)

// snapshot is the part of the NB cache nbsync looks at, indexed by name / UUID.
type snapshot struct {
	switches map[string]*nb.LogicalSwitch
	lsps     map[string]*nb.LogicalSwitchPort
	lspByID  map[string]*nb.LogicalSwitchPort
	routers  map[string]*nb.LogicalRouter
	lrps     map[string]*nb.LogicalRouterPort
	lrpByID  map[string]*nb.LogicalRouterPort
	policies map[string]*nb.LogicalRouterPolicy
	routes   map[string]*nb.LogicalRouterStaticRoute
	pgs      map[string]*nb.PortGroup
}

func load(ctx context.Context, c client.Client) (*snapshot, error) {
	s := &snapshot{switches: map[string]*nb.LogicalSwitch{}, lsps: map[string]*nb.LogicalSwitchPort{},
		lspByID: map[string]*nb.LogicalSwitchPort{}, routers: map[string]*nb.LogicalRouter{},
		lrps: map[string]*nb.LogicalRouterPort{}, lrpByID: map[string]*nb.LogicalRouterPort{},
		policies: map[string]*nb.LogicalRouterPolicy{}, routes: map[string]*nb.LogicalRouterStaticRoute{},
		pgs: map[string]*nb.PortGroup{}}
	var lss []nb.LogicalSwitch
	var lsps []nb.LogicalSwitchPort
	var lrs []nb.LogicalRouter
	var lrps []nb.LogicalRouterPort
	var pols []nb.LogicalRouterPolicy
	var routes []nb.LogicalRouterStaticRoute
	var pgs []nb.PortGroup
	for _, l := range []any{&lss, &lsps, &lrs, &lrps, &pols, &routes, &pgs} {
		if err := c.List(ctx, l); err != nil {
			return nil, err
		}
	}
	for i := range lss {
		s.switches[lss[i].Name] = &lss[i]
	}
	for i := range lsps {
		s.lsps[lsps[i].Name], s.lspByID[lsps[i].UUID] = &lsps[i], &lsps[i]
	}
	for i := range lrs {
		s.routers[lrs[i].Name] = &lrs[i]
	}
	for i := range lrps {
		s.lrps[lrps[i].Name], s.lrpByID[lrps[i].UUID] = &lrps[i], &lrps[i]
	}
	for i := range pols {
		s.policies[pols[i].UUID] = &pols[i]
	}
	for i := range routes {
		s.routes[routes[i].UUID] = &routes[i]
	}
	for i := range pgs {
		s.pgs[pgs[i].Name] = &pgs[i]
	}
	return s, nil
}

// tx accumulates the operations of one Apply.
type tx struct {
	c    client.Client
	ops  []ovsdb.Operation
	err  error
	lspU map[string]string // LSP name -> UUID (real or named) after this transaction
}

func (t *tx) add(ops []ovsdb.Operation, err error) {
	if t.err == nil && err != nil {
		t.err = err
	}
	t.ops = append(t.ops, ops...)
}

// create inserts m under a fresh named UUID and returns it.
func (t *tx) create(m any, setUUID func(string)) string {
	id := ovn.NewNamedUUID()
	setUUID(id)
	ops, err := t.c.Create(m)
	t.add(ops, err)
	return id
}

// update writes fields of m (which carries the row's UUID).
func (t *tx) update(m any, fields ...any) {
	ops, err := t.c.Where(m).Update(m, fields...)
	t.add(ops, err)
}

func (t *tx) delete(m any) {
	ops, err := t.c.Where(m).Delete()
	t.add(ops, err)
}

// Apply makes the NB database match d and returns the number of operations it sent.
func Apply(ctx context.Context, c client.Client, d topology.Desired) (int, error) {
	s, err := load(ctx, c)
	if err != nil {
		return 0, err
	}
	t := &tx{c: c, lspU: map[string]string{}}
	wantSwitch := map[string]bool{}
	for _, sw := range d.Switches {
		wantSwitch[sw.Name] = true
		t.syncSwitch(s, sw)
	}
	for _, name := range d.Frozen {
		wantSwitch[name] = true
	}
	for name, ls := range s.switches {
		if _, owned := ls.ExternalIDs[ovn.OwnerTypeKey]; owned && !wantSwitch[name] {
			t.delete(ls) // its ports are garbage-collected with it
		}
	}
	wantRouter := map[string]bool{}
	for _, r := range d.Routers {
		wantRouter[r.Name] = true
		t.syncRouter(s, r)
	}
	for name, lr := range s.routers {
		if _, owned := lr.ExternalIDs[ovn.OwnerTypeKey]; owned && !wantRouter[name] {
			t.delete(lr)
		}
	}
	t.syncPortGroups(s, d.PortGroups)
	if t.err != nil {
		return 0, t.err
	}
	if len(t.ops) == 0 {
		return 0, nil
	}
	results, err := ovn.Transact(ctx, c, t.ops)
	if err != nil {
		return 0, err
	}
	return len(t.ops), waitForInserts(ctx, c, t.ops, results)
}

// waitForInserts blocks until the client's cache holds every row this transaction inserted.
// The cache is fed by the monitor asynchronously; the next Apply must not find a row missing
// that it just created, or it would create it twice.
func waitForInserts(ctx context.Context, c client.Client, ops []ovsdb.Operation, results []ovsdb.OperationResult) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i, op := range ops {
		if op.Op != ovsdb.OperationInsert || i >= len(results) {
			continue
		}
		for c.Cache().Table(op.Table) == nil || c.Cache().Table(op.Table).Row(results[i].UUID.GoUUID) == nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("row %s of %s not in the NB cache after insert: %w", results[i].UUID.GoUUID, op.Table, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

func ownerOfPort(p topology.SwitchPort, sw topology.Switch) map[string]string {
	switch {
	case p.ExternalIDs["pod"] != "":
		return ovn.OwnerIDs(OwnerPod, p.ExternalIDs["pod"], p.ExternalIDs)
	case p.Type == "" && p.ExternalIDs["node"] != "":
		return ovn.OwnerIDs(OwnerNode, p.ExternalIDs["node"], p.ExternalIDs)
	}
	return ovn.OwnerIDs(OwnerSubnet, sw.Owner, p.ExternalIDs)
}

func (t *tx) syncSwitch(s *snapshot, sw topology.Switch) {
	var ports []string
	for _, p := range sw.Ports {
		want := nb.LogicalSwitchPort{Name: p.Name, Type: p.Type, Addresses: p.Addresses, PortSecurity: p.PortSecurity,
			Options: p.Options, ExternalIDs: ownerOfPort(p, sw)}
		if cur, ok := s.lsps[p.Name]; ok {
			want.UUID = cur.UUID
			if !sameSet(cur.Addresses, want.Addresses) || !sameSet(cur.PortSecurity, want.PortSecurity) ||
				cur.Type != want.Type || !sameMap(cur.Options, want.Options) || !sameMap(cur.ExternalIDs, want.ExternalIDs) {
				t.update(&want, &want.Type, &want.Addresses, &want.PortSecurity, &want.Options, &want.ExternalIDs)
			}
		} else {
			t.create(&want, func(id string) { want.UUID = id })
		}
		t.lspU[p.Name] = want.UUID
		ports = append(ports, want.UUID)
	}
	want := nb.LogicalSwitch{Name: sw.Name, OtherConfig: sw.OtherConfig, ExternalIDs: ovn.OwnerIDs(OwnerSubnet, sw.Owner, nil)}
	cur, ok := s.switches[sw.Name]
	if !ok {
		want.Ports = ports
		t.create(&want, func(id string) { want.UUID = id })
		return
	}
	for _, id := range cur.Ports { // ports of other tools (ovn-ic, an admin) stay
		if p, ok := s.lspByID[id]; ok {
			if _, owned := p.ExternalIDs[ovn.OwnerTypeKey]; !owned {
				ports = append(ports, id)
			}
		}
	}
	want.UUID, want.Ports = cur.UUID, ports
	if !sameSet(cur.Ports, ports) || !sameMap(cur.OtherConfig, want.OtherConfig) || !sameMap(cur.ExternalIDs, want.ExternalIDs) {
		t.update(&want, &want.Ports, &want.OtherConfig, &want.ExternalIDs)
	}
}

func policyKey(prio int, match string) string { return fmt.Sprintf("%d|%s", prio, match) }

func (t *tx) syncRouter(s *snapshot, r topology.Router) {
	owner := ovn.OwnerIDs(OwnerVpc, r.Owner, nil)
	cur := s.routers[r.Name]
	ports := t.routerPorts(s, r, cur)
	existingPol := map[string]*nb.LogicalRouterPolicy{}
	existingRoute := map[string]*nb.LogicalRouterStaticRoute{}
	var foreignPol, foreignRoute []string
	if cur != nil {
		for _, id := range cur.Policies {
			if p, ok := s.policies[id]; ok {
				if _, owned := p.ExternalIDs[ovn.OwnerTypeKey]; owned {
					existingPol[policyKey(p.Priority, p.Match)] = p
				} else {
					foreignPol = append(foreignPol, id)
				}
			}
		}
		for _, id := range cur.StaticRoutes {
			if rt, ok := s.routes[id]; ok {
				if _, owned := rt.ExternalIDs[ovn.OwnerTypeKey]; owned {
					existingRoute[rt.IPPrefix+"|"+rt.Nexthop] = rt
				} else {
					foreignRoute = append(foreignRoute, id)
				}
			}
		}
	}
	policies := append(t.policies(r, owner, existingPol), foreignPol...)
	routes := append(t.routes(r, owner, existingRoute), foreignRoute...)
	want := nb.LogicalRouter{Name: r.Name, ExternalIDs: owner, Ports: ports, Policies: policies, StaticRoutes: routes}
	if cur == nil {
		t.create(&want, func(id string) { want.UUID = id })
		return
	}
	want.UUID = cur.UUID
	if !sameSet(cur.Ports, ports) || !sameSet(cur.Policies, policies) || !sameSet(cur.StaticRoutes, routes) ||
		!sameMap(cur.ExternalIDs, owner) {
		t.update(&want, &want.Ports, &want.Policies, &want.StaticRoutes, &want.ExternalIDs)
	}
}

func (t *tx) routerPorts(s *snapshot, r topology.Router, cur *nb.LogicalRouter) []string {
	var ids []string
	for _, p := range r.Ports {
		want := nb.LogicalRouterPort{Name: p.Name, MAC: p.MAC, Networks: p.Networks, ExternalIDs: ovn.OwnerIDs(OwnerVpc, r.Owner, nil)}
		if c, ok := s.lrps[p.Name]; ok {
			want.UUID = c.UUID
			if c.MAC != want.MAC || !sameSet(c.Networks, want.Networks) || !sameMap(c.ExternalIDs, want.ExternalIDs) {
				t.update(&want, &want.MAC, &want.Networks, &want.ExternalIDs)
			}
		} else {
			t.create(&want, func(id string) { want.UUID = id })
		}
		ids = append(ids, want.UUID)
	}
	if cur != nil {
		for _, id := range cur.Ports {
			if p, ok := s.lrpByID[id]; ok {
				if _, owned := p.ExternalIDs[ovn.OwnerTypeKey]; !owned {
					ids = append(ids, id) // e.g. the transit-switch port ovn-ic manages
				}
			}
		}
	}
	return ids
}

func (t *tx) policies(r topology.Router, owner map[string]string, existing map[string]*nb.LogicalRouterPolicy) []string {
	var ids []string
	for _, p := range r.Policies {
		want := nb.LogicalRouterPolicy{Priority: p.Priority, Match: p.Match, Action: p.Action, Nexthops: p.Nexthops, ExternalIDs: owner}
		if c, ok := existing[policyKey(p.Priority, p.Match)]; ok {
			want.UUID = c.UUID
			if c.Action != want.Action || !sameSet(c.Nexthops, want.Nexthops) || !sameMap(c.ExternalIDs, owner) {
				t.update(&want, &want.Action, &want.Nexthops, &want.ExternalIDs)
			}
		} else {
			t.create(&want, func(id string) { want.UUID = id })
		}
		ids = append(ids, want.UUID)
	}
	return ids
}

func (t *tx) routes(r topology.Router, owner map[string]string, existing map[string]*nb.LogicalRouterStaticRoute) []string {
	var ids []string
	for _, rt := range r.Routes {
		if c, ok := existing[rt.Prefix+"|"+rt.Nexthop]; ok {
			ids = append(ids, c.UUID)
			continue
		}
		want := nb.LogicalRouterStaticRoute{IPPrefix: rt.Prefix, Nexthop: rt.Nexthop, ExternalIDs: owner}
		ids = append(ids, t.create(&want, func(id string) { want.UUID = id }))
	}
	return ids
}

func (t *tx) syncPortGroups(s *snapshot, pgs []topology.PortGroup) {
	want := map[string]bool{}
	for _, pg := range pgs {
		want[pg.Name] = true
		var ports []string
		for _, name := range pg.Ports {
			if id, ok := t.lspU[name]; ok {
				ports = append(ports, id)
			}
		}
		m := nb.PortGroup{Name: pg.Name, Ports: ports, ExternalIDs: ovn.OwnerIDs(OwnerNode, pg.Owner, nil)}
		cur, ok := s.pgs[pg.Name]
		if !ok {
			t.create(&m, func(id string) { m.UUID = id })
			continue
		}
		m.UUID = cur.UUID
		if !sameSet(cur.Ports, ports) || !sameMap(cur.ExternalIDs, m.ExternalIDs) {
			t.update(&m, &m.Ports, &m.ExternalIDs)
		}
	}
	for name, pg := range s.pgs {
		if _, owned := pg.ExternalIDs[ovn.OwnerTypeKey]; owned && !want[name] {
			t.delete(pg)
		}
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	sort.Strings(x)
	sort.Strings(y)
	return slices.Equal(x, y)
}

func sameMap(a, b map[string]string) bool { return maps.Equal(a, b) || (len(a) == 0 && len(b) == 0) }
