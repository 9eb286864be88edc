package nbsync

import (
	"maps"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Load balancers, their groups, and the groups switches and routers reference.
//
// Load_Balancer is a root table: an LB in no group is not garbage-collected by the server and
// stays until its shard stops wanting it. Group membership (Load_Balancer_Group.load_balancer,
// a weak reference) is shared by every writer, so an LB joins and leaves a group by mutation;
// deleting an LB removes it from its groups by itself.
//
// Load_Balancer_Group has no external_ids column, so the groups a shard owns cannot be tagged
// on the rows. They are recorded in NB_Global's external_ids, one key per owner
// (ownedGroupsKey), changed by mutation of that key alone.
//
// Switches and routers reference groups strongly: a referenced group cannot be deleted. Deleting
// a group therefore first removes it from every switch and router, whoever added it.

const (
	// lbGroupsKey lists, on a load balancer, the groups nbsync put it into, and on a switch or
	// router the groups nbsync added to its load_balancer_group column: what nbsync added and
	// no longer wants is removed, references others added stay.
	lbGroupsKey = "kovn.io/lb-groups"
	// ownedGroupsPrefix + "<owner type>/<owner>" is the NB_Global external_ids key listing the
	// load balancer groups that owner's shard created.
	ownedGroupsPrefix = "kovn.io/lb-groups/"
)

var groupLBs = ref[*nb.LoadBalancerGroup]{"Load_Balancer_Group", "load_balancer",
	func(g *nb.LoadBalancerGroup) *[]string { return &g.LoadBalancer }}

func ownedGroupsKey(ownerType, owner string) string {
	return ownedGroupsPrefix + ownerType + "/" + owner
}

// lbGroup returns the group named name: the model this transaction inserts, or the cached row
// (whole: its member list is checked so that an LB missing from it is added back).
func (t *tx) lbGroup(name string) (*nb.LoadBalancerGroup, bool) {
	if g, ok := t.newGroup[name]; ok {
		return g, true
	}
	return byName(t, &nb.LoadBalancerGroup{Name: name}), false
}

// lbGroupUUID returns the (possibly named) UUID of the group, without copying its row.
func (t *tx) lbGroupUUID(name string) string {
	if g, ok := t.newGroup[name]; ok {
		return g.UUID
	}
	return t.uuidByName("Load_Balancer_Group", name)
}

func (t *tx) nbGlobal() *nb.NBGlobal {
	var rows []*nb.NBGlobal
	if err := t.c.List(t.ctx, &rows); err != nil {
		t.add(nil, err)
		return nil
	}
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

// syncLBGroups creates the groups the shard wants and deletes the ones it recorded before and
// no longer wants. A group that already exists is adopted, as port groups are.
func (t *tx) syncLBGroups() {
	key := ownedGroupsKey(t.sh.OwnerType, t.sh.Owner)
	g := t.nbGlobal()
	var old []string
	if g != nil {
		old = splitList(g.ExternalIDs[key])
	}
	if len(t.sh.LoadBalancerGroups) == 0 && len(old) == 0 {
		return
	}
	if g == nil { // northd creates it; without it ownership could not be recorded
		t.missing = append(t.missing, "NB_Global (records load balancer group owners)")
		return
	}
	want := map[string]bool{}
	for _, lg := range t.sh.LoadBalancerGroups {
		want[lg.Name] = true
		if t.lbGroupUUID(lg.Name) == "" {
			t.newGroup[lg.Name] = &nb.LoadBalancerGroup{UUID: ovn.NewNamedUUID(), Name: lg.Name}
		}
	}
	for _, name := range old {
		if !want[name] {
			t.deleteLBGroup(name)
		}
	}
	ids := map[string]string{}
	setList(ids, key, slices.Collect(maps.Keys(want)))
	t.setKeys(g, &g.ExternalIDs, ids, []string{key})
}

// deleteLBGroup removes the group from every switch and router referencing it (one mutation
// per table, conditioned on the reference, so no row is read) and deletes it.
func (t *tx) deleteLBGroup(name string) {
	uuid := t.uuidByName("Load_Balancer_Group", name)
	if uuid == "" {
		return
	}
	set := ovsdb.OvsSet{GoSet: []any{ovsdb.UUID{GoUUID: uuid}}}
	for _, table := range []string{"Logical_Switch", "Logical_Router"} {
		t.ops = append(t.ops, ovsdb.Operation{Op: ovsdb.OperationMutate, Table: table,
			Where:     []ovsdb.Condition{{Column: "load_balancer_group", Function: ovsdb.ConditionIncludes, Value: set}},
			Mutations: []ovsdb.Mutation{{Column: "load_balancer_group", Mutator: ovsdb.MutateOperationDelete, Value: set}}})
	}
	t.ops = append(t.ops, ovsdb.Operation{Op: ovsdb.OperationDelete, Table: "Load_Balancer_Group",
		Where: []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: uuid}}}})
}

// insertNewGroups emits the inserts of the groups this transaction creates, once their member
// LBs are in them and before the switches and routers that reference them. RFC 7047 lets
// operations after an insert use its named UUID; ovsdb-server and libovsdb's server also
// accept earlier uses, but nothing here relies on that.
func (t *tx) insertNewGroups() {
	names := slices.Sorted(maps.Keys(t.newGroup))
	for _, name := range names {
		ops, err := t.c.Create(t.newGroup[name])
		t.add(ops, err)
	}
}

func (t *tx) syncLoadBalancers() {
	want := map[string]bool{}
	for _, lb := range t.sh.LoadBalancers {
		want[lb.Name] = true
		t.syncLoadBalancer(lb)
	}
	for _, cur := range findOwned(t, &nb.LoadBalancer{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[cur.Name] {
			t.delete(cur) // groups reference LBs weakly: membership goes with the row
		}
	}
}

// ownedLB returns this owner's LB named name. LB names are not unique in the schema: another
// writer's LB of the same name is left alone.
func (t *tx) ownedLB(name string) *nb.LoadBalancer {
	var rows []*nb.LoadBalancer
	if err := t.c.Where(&nb.LoadBalancer{Name: name}).List(t.ctx, &rows); err != nil {
		t.add(nil, err)
		return nil
	}
	for _, r := range rows {
		if t.owned(r.ExternalIDs) {
			return r
		}
	}
	return nil
}

// syncLoadBalancer creates or updates one LB (the whole row is the shard's) and settles its
// group memberships. The LB's insert comes before the mutations that add it to groups.
func (t *tx) syncLoadBalancer(lb topology.LoadBalancer) {
	cur := t.ownedLB(lb.Name)
	var oldGroups []string
	if cur != nil {
		oldGroups = splitList(cur.ExternalIDs[lbGroupsKey])
	}
	var joined []string
	groups := map[string]*nb.LoadBalancerGroup{} // looked up once: a group's row lists every member
	isNew := map[string]bool{}
	for _, name := range lb.Groups {
		if g, gNew := t.lbGroup(name); g != nil {
			joined = append(joined, name)
			groups[name], isNew[name] = g, gNew
		} else {
			t.missing = append(t.missing, "load balancer group "+name)
		}
	}
	extra := maps.Clone(lb.ExternalIDs)
	if extra == nil {
		extra = map[string]string{}
	}
	delete(extra, lbGroupsKey) // nbsync's record of memberships, never the model's
	setList(extra, lbGroupsKey, joined)
	m := nb.LoadBalancer{Name: lb.Name, Vips: maps.Clone(lb.VIPs), Options: maps.Clone(lb.Options),
		SelectionFields: slices.Clone(lb.SelectionFields), ExternalIDs: t.ids(extra, "")}
	if lb.Protocol != "" {
		m.Protocol = &lb.Protocol
	}
	if cur == nil {
		t.create(&m, func(id string) { m.UUID = id })
	} else {
		m.UUID = cur.UUID
		if !sameLB(cur, &m) {
			t.update(&m, &m.Vips, &m.Options, &m.Protocol, &m.SelectionFields, &m.ExternalIDs)
		}
	}
	for _, name := range joined {
		attach(t, "load balancer group "+name, groups[name], isNew[name], groupLBs, m.UUID)
	}
	for _, name := range oldGroups {
		if slices.Contains(joined, name) {
			continue
		}
		if g, isNew := t.lbGroup(name); !isNew {
			detach(t, g, groupLBs, m.UUID)
		}
	}
}

func sameLB(cur, want *nb.LoadBalancer) bool {
	return ptr.Deref(cur.Protocol, "") == ptr.Deref(want.Protocol, "") && sameMap(cur.Vips, want.Vips) &&
		sameMap(cur.Options, want.Options) && sameSet(cur.SelectionFields, want.SelectionFields) &&
		sameMap(cur.ExternalIDs, want.ExternalIDs)
}

// lbGroupRefs resolves the groups a switch or router should reference to UUIDs, recording the
// groups that do not exist yet as missing.
func (t *tx) lbGroupRefs(names []string) (joined, uuids []string) {
	for _, name := range names {
		if id := t.lbGroupUUID(name); id != "" {
			joined = append(joined, name)
			uuids = append(uuids, id)
		} else {
			t.missing = append(t.missing, "load balancer group "+name)
		}
	}
	return joined, uuids
}

// mutateGroupRefs makes the existing switch or router (table, uuid) whose load_balancer_group
// column is have reference uuids, and stop referencing the groups of oldNames (those nbsync
// added before) that are no longer joined. References others added are never removed.
func (t *tx) mutateGroupRefs(table, uuid string, have, oldNames, joined, uuids []string) {
	for _, id := range uuids {
		if !slices.Contains(have, id) {
			t.ops = append(t.ops, refMutation(table, uuid, "load_balancer_group", ovsdb.MutateOperationInsert, id))
		}
	}
	for _, name := range oldNames {
		if slices.Contains(joined, name) {
			continue
		}
		if id := t.uuidByName("Load_Balancer_Group", name); id != "" && slices.Contains(have, id) {
			t.ops = append(t.ops, refMutation(table, uuid, "load_balancer_group", ovsdb.MutateOperationDelete, id))
		}
	}
}

// setList sets ids[key] to the sorted list of names, or leaves it out when there are none (a
// row that never had any keeps no empty key).
func setList(ids map[string]string, key string, names []string) {
	if len(names) > 0 {
		ids[key] = keyList(names)
	}
}

// ownedGroupsOwner parses an NB_Global external_ids key written by syncLBGroups.
func ownedGroupsOwner(key string) (Owner, bool) {
	rest, ok := strings.CutPrefix(key, ownedGroupsPrefix)
	if !ok {
		return Owner{}, false
	}
	typ, owner, ok := strings.Cut(rest, "/")
	return Owner{typ, owner}, ok && owner != ""
}
