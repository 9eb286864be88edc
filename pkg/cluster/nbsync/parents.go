package nbsync

import (
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Parents (routers, switches, port groups) reference their children by UUID in set columns
// that several writers share. Children are added and removed by mutation; a parent created by
// the same transaction gets them in its insert instead.

func (t *tx) router(name string) (*nb.LogicalRouter, bool) {
	if m, ok := t.newParent["Logical_Router/"+name]; ok {
		return m.(*nb.LogicalRouter), true
	}
	return byName(t, &nb.LogicalRouter{Name: name}), false
}

func (t *tx) lswitch(name string) (*nb.LogicalSwitch, bool) {
	if m, ok := t.newParent["Logical_Switch/"+name]; ok {
		return m.(*nb.LogicalSwitch), true
	}
	return byName(t, &nb.LogicalSwitch{Name: name}), false
}

func (t *tx) portGroup(name string) (*nb.PortGroup, bool) {
	if m, ok := t.newParent["Port_Group/"+name]; ok {
		return m.(*nb.PortGroup), true
	}
	return byName(t, &nb.PortGroup{Name: name}), false
}

// attach adds uuid to the set column col of parent m (isNew: m is inserted by this
// transaction). It reports false, and records the parent as missing, when m is nil.
func attach[M model.Model](t *tx, what string, m M, isNew bool, col func(M) *[]string, uuid string) bool {
	if any(m) == nil || isNilPtr(m) {
		t.missing = append(t.missing, what)
		return false
	}
	f := col(m)
	switch {
	case isNew:
		*f = append(*f, uuid)
	case !slices.Contains(*f, uuid):
		t.mutate(m, model.Mutation{Field: f, Mutator: ovsdb.MutateOperationInsert, Value: []string{uuid}})
	}
	return true
}

// detach removes uuid from the set column col of the existing parent m, if it holds it.
func detach[M model.Model](t *tx, m M, col func(M) *[]string, uuid string) {
	if any(m) == nil || isNilPtr(m) {
		return
	}
	if f := col(m); slices.Contains(*f, uuid) {
		t.mutate(m, model.Mutation{Field: f, Mutator: ovsdb.MutateOperationDelete, Value: []string{uuid}})
	}
}

func isNilPtr[M model.Model](m M) bool {
	switch p := any(m).(type) {
	case *nb.LogicalRouter:
		return p == nil
	case *nb.LogicalSwitch:
		return p == nil
	case *nb.PortGroup:
		return p == nil
	}
	return false
}

func routerPorts(lr *nb.LogicalRouter) *[]string    { return &lr.Ports }
func routerPolicies(lr *nb.LogicalRouter) *[]string { return &lr.Policies }
func routerRoutes(lr *nb.LogicalRouter) *[]string   { return &lr.StaticRoutes }
func switchPorts(ls *nb.LogicalSwitch) *[]string    { return &ls.Ports }
func groupPorts(pg *nb.PortGroup) *[]string         { return &pg.Ports }

// parentRouter returns the router referencing child uuid through col: the one its parent key
// names, else (rows written before the key existed) the one found by a scan of the routers.
func (t *tx) parentRouter(ids map[string]string, col func(*nb.LogicalRouter) *[]string, uuid string) *nb.LogicalRouter {
	if name := ids[ovn.ParentKey]; name != "" {
		lr, _ := t.router(name)
		return lr
	}
	var all []*nb.LogicalRouter
	_ = t.c.List(t.ctx, &all)
	for _, lr := range all {
		if slices.Contains(*col(lr), uuid) {
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
	cur := *field
	del, ins := map[string]string{}, map[string]string{}
	for k, v := range want {
		if old, ok := cur[k]; !ok || old != v {
			if ok {
				del[k] = old
			}
			ins[k] = v
		}
	}
	for _, k := range drop {
		if _, keep := want[k]; !keep {
			if old, ok := cur[k]; ok {
				del[k] = old
			}
		}
	}
	var muts []model.Mutation
	if len(del) > 0 {
		muts = append(muts, model.Mutation{Field: field, Mutator: ovsdb.MutateOperationDelete, Value: del})
	}
	if len(ins) > 0 {
		muts = append(muts, model.Mutation{Field: field, Mutator: ovsdb.MutateOperationInsert, Value: ins})
	}
	if len(muts) > 0 {
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
