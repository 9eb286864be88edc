package nbsync

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Keys nbsync keeps in external_ids beside ownership.
const (
	// otherConfigKeys lists the other_config keys kovn set on a switch, so a key it no
	// longer wants is removed while keys of others stay.
	otherConfigKeys = "kovn.io/other-config"
	// portGroupsKey lists the port groups a switch port was put into, so a port leaving a
	// group (a pod recreated on another node) is removed from the old one by name.
	portGroupsKey = "kovn.io/port-groups"
)

func (t *tx) syncRouters() {
	want := map[string]bool{}
	for _, r := range t.sh.Routers {
		want[r.Name] = true
		joined, groups := t.lbGroupRefs(r.LBGroups)
		ids := t.ids(nil, "")
		setList(ids, lbGroupsKey, joined)
		cur := byName(t, &nb.LogicalRouter{Name: r.Name})
		if cur == nil {
			t.newParent["Logical_Router/"+r.Name] = &nb.LogicalRouter{UUID: ovn.NewNamedUUID(), Name: r.Name, ExternalIDs: ids,
				LoadBalancerGroup: groups}
			continue
		}
		t.mutateGroupRefs("Logical_Router", cur.UUID, cur.LoadBalancerGroup, splitList(cur.ExternalIDs[lbGroupsKey]), joined, groups)
		t.setKeys(cur, &cur.ExternalIDs, ids, []string{lbGroupsKey})
	}
	for _, lr := range findOwned(t, &nb.LogicalRouter{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[lr.Name] {
			t.delete(lr)
		}
	}
}

func (t *tx) syncSwitches() {
	want := map[string]bool{}
	for _, sw := range t.sh.Switches {
		want[sw.Name] = true
		keys := slices.Collect(maps.Keys(sw.OtherConfig))
		joined, groups := t.lbGroupRefs(sw.LBGroups)
		ids := t.ids(map[string]string{otherConfigKeys: keyList(keys)}, "")
		setList(ids, lbGroupsKey, joined)
		cur := byName(t, &nb.LogicalSwitch{Name: sw.Name})
		if cur == nil {
			t.newParent["Logical_Switch/"+sw.Name] = &nb.LogicalSwitch{UUID: ovn.NewNamedUUID(), Name: sw.Name,
				OtherConfig: maps.Clone(sw.OtherConfig), ExternalIDs: ids, LoadBalancerGroup: groups}
			continue
		}
		t.setKeys(cur, &cur.OtherConfig, sw.OtherConfig, splitList(cur.ExternalIDs[otherConfigKeys]))
		t.mutateGroupRefs("Logical_Switch", cur.UUID, cur.LoadBalancerGroup, splitList(cur.ExternalIDs[lbGroupsKey]), joined, groups)
		t.setKeys(cur, &cur.ExternalIDs, ids, []string{lbGroupsKey})
	}
	for _, ls := range findOwned(t, &nb.LogicalSwitch{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[ls.Name] {
			t.delete(ls) // its ports go with it (OVSDB garbage-collects unreferenced children)
		}
	}
}

func (t *tx) syncPortGroups() {
	want := map[string]bool{}
	for _, pg := range t.sh.PortGroups {
		want[pg.Name] = true
		ids := t.ids(nil, "")
		cur := byName(t, &nb.PortGroup{Name: pg.Name})
		if cur == nil {
			t.newParent["Port_Group/"+pg.Name] = &nb.PortGroup{UUID: ovn.NewNamedUUID(), Name: pg.Name, ExternalIDs: ids}
			continue
		}
		t.setKeys(cur, &cur.ExternalIDs, ids, nil)
	}
	for _, pg := range findOwned(t, &nb.PortGroup{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[pg.Name] {
			t.delete(pg)
		}
	}
}

func (t *tx) syncRouterPorts() {
	want := map[string]bool{}
	for _, rp := range t.sh.RouterPorts {
		want[rp.Name] = true
		// ipv6_ra_configs is written whole (an update naming it writes a nil map as the empty
		// one): nbsync created the row and owns every column of it.
		m := nb.LogicalRouterPort{Name: rp.Name, MAC: rp.MAC, Networks: rp.Networks, ExternalIDs: t.ids(rp.ExternalIDs, rp.Router),
			Ipv6RaConfigs: maps.Clone(rp.IPv6RAConfigs)}
		cur := byName(t, &nb.LogicalRouterPort{Name: rp.Name})
		if cur == nil {
			lr, isNew := t.router(rp.Router)
			if lr == nil {
				t.missing = append(t.missing, "router "+rp.Router)
				continue
			}
			m.GatewayChassis, _ = t.gatewayChassis(rp, nil)
			id := t.create(&m, func(id string) { m.UUID = id })
			attach(t, "router "+rp.Router, lr, isNew, routerPorts, id)
			continue
		}
		m.UUID = cur.UUID
		if cur.MAC != m.MAC || !sameSet(cur.Networks, m.Networks) || !sameMap(cur.ExternalIDs, m.ExternalIDs) ||
			!sameMap(cur.Ipv6RaConfigs, m.Ipv6RaConfigs) {
			t.update(&m, &m.MAC, &m.Networks, &m.ExternalIDs, &m.Ipv6RaConfigs)
		}
		if gcs, changed := t.gatewayChassis(rp, cur.GatewayChassis); changed {
			m.GatewayChassis = gcs
			t.update(&m, &m.GatewayChassis)
		}
		if cur.ExternalIDs[ovn.ParentKey] != rp.Router {
			detach(t, t.parentRouter(cur.ExternalIDs, routerPorts, cur.UUID), routerPorts, cur.UUID)
			lr, isNew := t.router(rp.Router)
			attach(t, "router "+rp.Router, lr, isNew, routerPorts, cur.UUID)
		}
	}
	for _, rp := range findOwned(t, &nb.LogicalRouterPort{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[rp.Name] {
			detach(t, t.parentRouter(rp.ExternalIDs, routerPorts, rp.UUID), routerPorts, rp.UUID)
			t.delete(rp)
		}
	}
}

// memberships returns, per switch port of the shard, the port groups it belongs to.
func (t *tx) memberships() map[string][]string {
	out := map[string][]string{}
	for _, m := range t.sh.Memberships {
		out[m.Port] = append(out[m.Port], m.PortGroup)
	}
	return out
}

func (t *tx) syncSwitchPorts() {
	want := map[string]bool{}
	groups := t.memberships()
	for _, sp := range t.sh.SwitchPorts {
		want[sp.Name] = true
		if ls, _ := t.lswitch(sp.Switch); ls == nil {
			t.missing = append(t.missing, "switch "+sp.Switch)
			continue
		}
		t.syncSwitchPort(sp, groups[sp.Name])
	}
	for _, sp := range findOwned(t, &nb.LogicalSwitchPort{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[sp.Name] {
			detach(t, t.parentSwitch(sp.ExternalIDs, sp.UUID), switchPorts, sp.UUID)
			t.delete(sp) // port groups reference ports weakly: membership goes with the row
		}
	}
}

// syncSwitchPort creates or updates one port, moves it to its switch and settles its port
// group memberships. Inserts come before the mutations that reference them.
func (t *tx) syncSwitchPort(sp topology.SwitchPort, wantGroups []string) {
	ls, isNew := t.lswitch(sp.Switch)
	cur := byName(t, &nb.LogicalSwitchPort{Name: sp.Name})
	var oldGroups []string
	if cur != nil {
		oldGroups = splitList(cur.ExternalIDs[portGroupsKey])
	}
	joined := t.existingGroups(wantGroups)
	extra := maps.Clone(sp.ExternalIDs)
	if len(joined) > 0 {
		if extra == nil {
			extra = map[string]string{}
		}
		extra[portGroupsKey] = keyList(joined)
	}
	m := nb.LogicalSwitchPort{Name: sp.Name, Type: sp.Type, Addresses: sp.Addresses, PortSecurity: sp.PortSecurity,
		Options: sp.Options, Tag: sp.Tag, ExternalIDs: t.ids(extra, sp.Switch)}
	if cur == nil {
		attach(t, "switch "+sp.Switch, ls, isNew, switchPorts, t.create(&m, func(id string) { m.UUID = id }))
	} else {
		m.UUID = cur.UUID
		if !samePort(cur, &m) {
			t.update(&m, &m.Type, &m.Addresses, &m.PortSecurity, &m.Options, &m.Tag, &m.ExternalIDs)
		}
		if cur.ExternalIDs[ovn.ParentKey] != sp.Switch {
			detach(t, t.parentSwitch(cur.ExternalIDs, cur.UUID), switchPorts, cur.UUID)
			attach(t, "switch "+sp.Switch, ls, isNew, switchPorts, cur.UUID)
		}
	}
	for _, name := range joined {
		pg, pgNew := t.portGroup(name)
		attach(t, "port group "+name, pg, pgNew, groupPorts, m.UUID)
	}
	for _, name := range oldGroups {
		if !slices.Contains(joined, name) {
			pg, _ := t.portGroup(name)
			detach(t, pg, groupPorts, m.UUID)
		}
	}
}

// existingGroups returns the groups of names that exist (or are created by this transaction),
// recording the others as missing.
func (t *tx) existingGroups(names []string) []string {
	var out []string
	for _, name := range names {
		if pg, _ := t.portGroup(name); pg != nil {
			out = append(out, name)
		} else {
			t.missing = append(t.missing, "port group "+name)
		}
	}
	return out
}

func samePort(cur, want *nb.LogicalSwitchPort) bool {
	return cur.Type == want.Type && sameSet(cur.Addresses, want.Addresses) && sameSet(cur.PortSecurity, want.PortSecurity) &&
		sameMap(cur.Options, want.Options) && sameMap(cur.ExternalIDs, want.ExternalIDs) && sameTag(cur.Tag, want.Tag)
}

func sameTag(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func policyKey(router string, prio int, match string) string {
	return fmt.Sprintf("%s|%d|%s", router, prio, match)
}

func (t *tx) syncPolicies() {
	want := map[string]int{}
	for i, p := range t.sh.Policies {
		want[policyKey(p.Router, p.Priority, p.Match)] = i
	}
	done := map[string]bool{}
	for _, cur := range findOwned(t, &nb.LogicalRouterPolicy{ExternalIDs: ownerProbe(t.sh)}) {
		k := policyKey(cur.ExternalIDs[ovn.ParentKey], cur.Priority, cur.Match)
		i, ok := want[k]
		if !ok || done[k] {
			detach(t, t.parentRouter(cur.ExternalIDs, routerPolicies, cur.UUID), routerPolicies, cur.UUID)
			t.delete(cur)
			continue
		}
		done[k] = true
		p := t.sh.Policies[i]
		m := nb.LogicalRouterPolicy{UUID: cur.UUID, Priority: p.Priority, Match: p.Match, Action: p.Action, Nexthops: p.Nexthops,
			ExternalIDs: t.ids(p.ExternalIDs, p.Router)}
		if cur.Action != m.Action || !sameSet(cur.Nexthops, m.Nexthops) || !sameMap(cur.ExternalIDs, m.ExternalIDs) {
			t.update(&m, &m.Action, &m.Nexthops, &m.ExternalIDs)
		}
	}
	for _, p := range t.sh.Policies {
		if done[policyKey(p.Router, p.Priority, p.Match)] {
			continue
		}
		lr, isNew := t.router(p.Router)
		if lr == nil {
			t.missing = append(t.missing, "router "+p.Router)
			continue
		}
		m := nb.LogicalRouterPolicy{Priority: p.Priority, Match: p.Match, Action: p.Action, Nexthops: p.Nexthops, ExternalIDs: t.ids(p.ExternalIDs, p.Router)}
		attach(t, "router "+p.Router, lr, isNew, routerPolicies, t.create(&m, func(id string) { m.UUID = id }))
	}
}

func (t *tx) syncRoutes() {
	key := func(router, prefix, nexthop, policy string) string {
		if policy == nb.LogicalRouterStaticRoutePolicyDstIP {
			policy = ""
		}
		return router + "|" + prefix + "|" + nexthop + "|" + policy
	}
	want := map[string]bool{}
	for _, r := range t.sh.Routes {
		want[key(r.Router, r.Prefix, r.Nexthop, r.Policy)] = true
	}
	done := map[string]bool{}
	for _, cur := range findOwned(t, &nb.LogicalRouterStaticRoute{ExternalIDs: ownerProbe(t.sh)}) {
		policy := ""
		if cur.Policy != nil {
			policy = *cur.Policy
		}
		k := key(cur.ExternalIDs[ovn.ParentKey], cur.IPPrefix, cur.Nexthop, policy)
		if !want[k] || done[k] {
			detach(t, t.parentRouter(cur.ExternalIDs, routerRoutes, cur.UUID), routerRoutes, cur.UUID)
			t.delete(cur)
			continue
		}
		done[k] = true
	}
	for _, r := range t.sh.Routes {
		if done[key(r.Router, r.Prefix, r.Nexthop, r.Policy)] {
			continue
		}
		lr, isNew := t.router(r.Router)
		if lr == nil {
			t.missing = append(t.missing, "router "+r.Router)
			continue
		}
		m := nb.LogicalRouterStaticRoute{IPPrefix: r.Prefix, Nexthop: r.Nexthop, ExternalIDs: t.ids(nil, r.Router)}
		if r.Policy != "" {
			m.Policy = &r.Policy
		}
		attach(t, "router "+r.Router, lr, isNew, routerRoutes, t.create(&m, func(id string) { m.UUID = id }))
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
