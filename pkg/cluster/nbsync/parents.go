package nbsync

import (
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Parents (routers, switches, port groups, load balancer groups) reference their children by UUID in set columns
// that several writers share. Children are added and removed by mutation; a parent created by
// the same transaction gets them in its insert instead.

// router and lswitch return a parent to attach children to: the model this transaction
// inserts, or a stub holding only the existing row's UUID. The existing row itself is not
// read: a switch with ten thousand ports would be copied out of the cache on every pod event.
// Children are attached only when new or moved, so no membership check is needed.
func (t *tx) router(name string) (*nb.LogicalRouter, bool) {
	if m, ok := t.newParent["Logical_Router/"+name]; ok {
		return m.(*nb.LogicalRouter), true
	}
	if id := t.uuidByName("Logical_Router", name); id != "" {
		return &nb.LogicalRouter{UUID: id, Name: name}, false
	}
	return nil, false
}

func (t *tx) lswitch(name string) (*nb.LogicalSwitch, bool) {
	if m, ok := t.newParent["Logical_Switch/"+name]; ok {
		return m.(*nb.LogicalSwitch), true
	}
	if id := t.uuidByName("Logical_Switch", name); id != "" {
		return &nb.LogicalSwitch{UUID: id, Name: name}, false
	}
	return nil, false
}

// uuidByName looks a row up in the cache's name index without copying it.
func (t *tx) uuidByName(table, name string) string {
	tc := t.c.Cache().Table(table)
	if tc == nil {
		return ""
	}
	idx, err := tc.Index("name")
	if err != nil {
		t.add(nil, err)
		return ""
	}
	if ids := idx[name]; len(ids) > 0 {
		return ids[0]
	}
	return ""
}

func (t *tx) portGroup(name string) (*nb.PortGroup, bool) {
	if m, ok := t.newParent["Port_Group/"+name]; ok {
		return m.(*nb.PortGroup), true
	}
	return byName(t, &nb.PortGroup{Name: name}), false
}

// ref is a reference set column of a parent table.
type ref[M model.Model] struct {
	table, column string
	field         func(M) *[]string
}

var (
	routerPorts    = ref[*nb.LogicalRouter]{"Logical_Router", "ports", func(lr *nb.LogicalRouter) *[]string { return &lr.Ports }}
	routerPolicies = ref[*nb.LogicalRouter]{"Logical_Router", "policies", func(lr *nb.LogicalRouter) *[]string { return &lr.Policies }}
	routerRoutes   = ref[*nb.LogicalRouter]{"Logical_Router", "static_routes", func(lr *nb.LogicalRouter) *[]string { return &lr.StaticRoutes }}
	routerNATs     = ref[*nb.LogicalRouter]{"Logical_Router", "nat", func(lr *nb.LogicalRouter) *[]string { return &lr.Nat }}
	switchPorts    = ref[*nb.LogicalSwitch]{"Logical_Switch", "ports", func(ls *nb.LogicalSwitch) *[]string { return &ls.Ports }}
	switchACLs     = ref[*nb.LogicalSwitch]{"Logical_Switch", "acls", func(ls *nb.LogicalSwitch) *[]string { return &ls.ACLs }}
	switchQoS      = ref[*nb.LogicalSwitch]{"Logical_Switch", "qos_rules", func(ls *nb.LogicalSwitch) *[]string { return &ls.QOSRules }}
	groupPorts     = ref[*nb.PortGroup]{"Port_Group", "ports", func(pg *nb.PortGroup) *[]string { return &pg.Ports }}
)

// attach adds uuid to the reference column r of parent m (isNew: m is inserted by this
// transaction). It reports false, and records the parent as missing, when m is nil.
func attach[M model.Model](t *tx, what string, m M, isNew bool, r ref[M], uuid string) bool {
	if any(m) == nil || isNilPtr(m) {
		t.missing = append(t.missing, what)
		return false
	}
	f := r.field(m)
	switch {
	case isNew:
		*f = append(*f, uuid)
	case !slices.Contains(*f, uuid): // a stub lists nothing: callers attach only new or moved children
		t.ops = append(t.ops, refMutation(r.table, ovn.UUIDOf(m), r.column, ovsdb.MutateOperationInsert, uuid))
	}
	return true
}

// detach removes uuid from the reference column r of the existing parent m (callers detach
// only children that are leaving).
func detach[M model.Model](t *tx, m M, r ref[M], uuid string) {
	if any(m) == nil || isNilPtr(m) {
		return
	}
	t.ops = append(t.ops, refMutation(r.table, ovn.UUIDOf(m), r.column, ovsdb.MutateOperationDelete, uuid))
}

// refMutation inserts a child into, or deletes it from, a parent's reference set. It is built
// by hand: libovsdb's Mutate copies the whole parent row out of its cache to build the
// condition, and a switch's row lists every port.
func refMutation(table, parent, column string, mutator ovsdb.Mutator, child string) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationMutate, Table: table,
		Where: []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: parent}}},
		Mutations: []ovsdb.Mutation{{Column: column, Mutator: mutator,
			Value: ovsdb.OvsSet{GoSet: []interface{}{ovsdb.UUID{GoUUID: child}}}}}}
}

func isNilPtr[M model.Model](m M) bool {
	switch p := any(m).(type) {
	case *nb.LogicalRouter:
		return p == nil
	case *nb.LogicalSwitch:
		return p == nil
	case *nb.PortGroup:
		return p == nil
	case *nb.LoadBalancerGroup:
		return p == nil
	}
	return false
}

// parentRouter returns the router referencing child uuid through col: the one its parent key
// names, else (rows written before the key existed) the one found by a scan of the routers.
func (t *tx) parentRouter(ids map[string]string, r ref[*nb.LogicalRouter], uuid string) *nb.LogicalRouter {
	if name := ids[ovn.ParentKey]; name != "" {
		lr, _ := t.router(name)
		return lr
	}
	var all []*nb.LogicalRouter
	_ = t.c.List(t.ctx, &all)
	for _, lr := range all {
		if slices.Contains(*r.field(lr), uuid) {
			return lr
		}
	}
	return nil
}

// parentSwitch is parentRouter for switch ports.
func (t *tx) parentSwitch(ids map[string]string, uuid string) *nb.LogicalSwitch {
	if name := ids[ovn.ParentKey]; name != "" {
		ls, _ := t.lswitch(name)
		return ls
	}
	var all []*nb.LogicalSwitch
	_ = t.c.List(t.ctx, &all)
	for _, ls := range all {
		if slices.Contains(ls.Ports, uuid) {
			return ls
		}
	}
	return nil
}

// setKeys mutates the map column *field of the existing row m so that it holds every pair of
// want and none of the keys in drop, leaving every other key (another writer's) alone.
func (t *tx) setKeys(m model.Model, field *map[string]string, want map[string]string, drop []string) {
	if muts := ovn.MapMutations(field, *field, want, drop); len(muts) > 0 {
		t.mutate(m, muts...)
	}
}

// keyList and splitList store a set of names in one external_ids value.
func keyList(keys []string) string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
