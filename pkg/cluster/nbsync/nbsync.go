// Package nbsync applies one topology.Shard to the OVN northbound database in one
// transaction. It reads only the rows the shard's owner owns (found through the owner client
// index) and the parents those rows hang off (found by name), so its cost does not depend on
// how many other objects the cluster has. Rows are tagged with the writer "topology" and
// their owner; rows of other writers and of other tools are never touched, and the columns
// several writers share (a switch's ports, a router's policies, a port group's ports, other
// config keys, load balancer group members and references) are changed by mutation, never rewritten whole. A port group
// a shard owns outright (a NetworkPolicy's) is the exception: its ports and ACLs are its alone
// and written whole (acls.go). Applying an unchanged shard issues no transaction at all.
package nbsync

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Writer is the value of ovn.WriterKey on every row nbsync writes.
const Writer = "topology"

// ErrParentMissing: a row of the shard hangs off a switch, router or port group that does not
// exist yet (another shard creates it). Everything else was applied; apply again later.
var ErrParentMissing = errors.New("parent row does not exist yet")

// Owned reports whether external_ids mark a row as written by this writer for (ownerType,
// owner). Rows written before the writer key existed carry only the owner keys: they are
// adopted.
func Owned(ids map[string]string, ownerType, owner string) bool {
	if ids[ovn.OwnerTypeKey] != ownerType || ids[ovn.OwnerKey] != owner {
		return false
	}
	w := ids[ovn.WriterKey]
	return w == Writer || w == ""
}

// tx accumulates the operations of one Apply.
type tx struct {
	ctx       context.Context
	c         client.Client
	sh        topology.Shard
	ops       []ovsdb.Operation
	err       error
	missing   []string
	newParent map[string]model.Model           // parents inserted by this transaction, by "table/name"
	newGroup  map[string]*nb.LoadBalancerGroup // load balancer groups inserted by this transaction, by name
}

func (t *tx) add(ops []ovsdb.Operation, err error) {
	if err != nil && t.err == nil {
		t.err = err
	}
	t.ops = append(t.ops, ops...)
}

func (t *tx) ids(extra map[string]string, parent string) map[string]string {
	ids := ovn.OwnerIDs(t.sh.OwnerType, t.sh.Owner, extra)
	ids[ovn.WriterKey] = Writer
	if parent != "" {
		ids[ovn.ParentKey] = parent
	}
	return ids
}

func (t *tx) owned(ids map[string]string) bool { return Owned(ids, t.sh.OwnerType, t.sh.Owner) }

// Apply makes the rows sh's owner owns match sh and returns the number of operations sent.
// An empty shard deletes everything the owner had.
func Apply(ctx context.Context, c client.Client, sh topology.Shard) (int, error) {
	ops, missing, err := Plan(ctx, c, sh)
	if err != nil {
		return 0, err
	}
	if len(ops) > 0 {
		results, err := ovn.Transact(ctx, c, ops)
		if err != nil {
			return 0, err
		}
		if err := waitForInserts(ctx, c, ops, results); err != nil {
			return len(ops), err
		}
	}
	if len(missing) > 0 {
		return len(ops), fmt.Errorf("%w: %v", ErrParentMissing, missing)
	}
	return len(ops), nil
}

// Plan computes the operations Apply would send, from the client's cache, and the parents it
// found missing (their children are left out).
func Plan(ctx context.Context, c client.Client, sh topology.Shard) ([]ovsdb.Operation, []string, error) {
	t := &tx{ctx: ctx, c: c, sh: sh, newParent: map[string]model.Model{}, newGroup: map[string]*nb.LoadBalancerGroup{}}
	// Load balancers and their groups come first: the inserts of new groups must precede the
	// switches and routers that reference them.
	t.syncLBGroups()
	t.syncTemplateVars()
	t.syncLoadBalancers()
	t.insertNewGroups()
	t.syncRouters()
	t.syncSwitches()
	t.syncPortGroups()
	t.syncAddressSets()
	t.syncACLs() // after syncPortGroups: fills the ports and ACLs of the groups it creates
	t.syncQoS()
	t.syncMeters()
	t.syncRouterPorts()
	t.syncSwitchPorts()
	t.syncPolicies()
	t.syncRoutes()
	t.syncNATs() // after syncRouterPorts: a NAT names its gateway port
	t.syncStaticMACBindings()
	t.insertNewParents()
	return t.ops, t.missing, t.err
}

// findOwned returns the cached rows of T's table owned by sh's owner, through the owner index.
func findOwned[T any, PT interface {
	*T
	model.Model
}](t *tx, probe PT) []PT {
	rows, err := ownedRows[T, PT](t.ctx, t.c, probe, t.sh.OwnerType, t.sh.Owner)
	if err != nil {
		t.add(nil, err)
	}
	return rows
}

// ownedRows returns the cached rows of T's table that probe's owner index finds and that
// ownerType's owner owns.
func ownedRows[T any, PT interface {
	*T
	model.Model
}](ctx context.Context, c client.Client, probe PT, ownerType, owner string) ([]PT, error) {
	var rows []PT
	if err := c.Where(probe).List(ctx, &rows); err != nil && !errors.Is(err, client.ErrNotFound) {
		return nil, err
	}
	out := rows[:0]
	for _, r := range rows {
		if Owned(ovn.ExternalIDs(r), ownerType, owner) {
			out = append(out, r)
		}
	}
	return out, nil
}

func ownerProbe(sh topology.Shard) map[string]string {
	return map[string]string{ovn.OwnerKey: sh.Owner}
}

// byName returns the cached row of T's table named like probe (through the name index), or
// nil. The rows found are checked by name: when no row has the name, libovsdb falls through
// to the next index, the owner client index, where a probe without owner keys matches every
// row without them (another tool's), which must never be taken for the one named.
func byName[T any, PT interface {
	*T
	model.Model
}](t *tx, probe PT) PT {
	var rows []PT
	if err := t.c.Where(probe).List(t.ctx, &rows); err != nil && !errors.Is(err, client.ErrNotFound) {
		t.add(nil, err)
		return nil
	}
	name := nameOf(probe)
	for _, r := range rows {
		if nameOf(r) == name {
			return r
		}
	}
	return nil
}

// nameOf returns the name column of m ("" if it has none).
func nameOf(m model.Model) string {
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("ovsdb") == "name" && v.Field(i).Kind() == reflect.String {
			return v.Field(i).String()
		}
	}
	return ""
}

func (t *tx) create(m model.Model, setUUID func(string)) string {
	id := ovn.NewNamedUUID()
	setUUID(id)
	ops, err := t.c.Create(m)
	t.add(ops, err)
	return id
}

func (t *tx) update(m model.Model, fields ...any) {
	ops, err := t.c.Where(m).Update(m, fields...)
	t.add(ops, err)
}

// mutate mutates the row with m's UUID. The condition names the UUID explicitly: Where(m)
// would copy the whole row out of the cache to build it, and a switch's row holds every port.
func (t *tx) mutate(m model.Model, muts ...model.Mutation) {
	uuid := ovn.UUIDOf(m)
	if uuid == "" {
		t.add(nil, fmt.Errorf("mutating a %T without UUID", m))
		return
	}
	ops, err := t.c.WhereAll(m, model.Condition{Field: ovn.UUIDField(m), Function: ovsdb.ConditionEqual, Value: uuid}).Mutate(m, muts...)
	t.add(ops, err)
}

func (t *tx) delete(m model.Model) {
	ops, err := t.c.Where(m).Delete()
	t.add(ops, err)
}

// insertNewParents emits the inserts of parents created by this transaction last, once every
// child created with them has been added to their reference columns.
func (t *tx) insertNewParents() {
	for _, m := range t.newParent {
		ops, err := t.c.Create(m)
		t.add(ops, err)
	}
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
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	return nil
}
