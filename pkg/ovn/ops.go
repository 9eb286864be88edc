package ovn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/mapper"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// The helpers below follow ovn-kubernetes' libovsdb ops: a reconcile reads the monitor cache,
// appends the operations it needs with the ...Ops helpers and commits them with a single
// Transact, so OVN never sees half of a change. Type parameters are pointers to generated
// models, e.g. *nb.LogicalSwitchPort; predicates are func(*nb.LogicalSwitchPort) bool.

// ErrNotFound is returned by Get when no row matches.
var ErrNotFound = client.ErrNotFound

// namedUUIDCounter makes named UUIDs unique within a process, hence within a transaction.
var namedUUIDCounter atomic.Uint64

// NewNamedUUID returns a fresh named UUID ("u" + digits). A row inserted under it can be
// referenced by other operations of the same transaction, e.g. a new port added to a switch.
func NewNamedUUID() string {
	return "u" + strconv.FormatUint(namedUUIDCounter.Add(1), 10)
}

// Get returns a copy of the cached row matching m by UUID or by one of the table's schema
// indexes (e.g. Logical_Switch_Port's name), or ErrNotFound.
func Get[T model.Model](ctx context.Context, c client.Client, m T) (T, error) {
	found, ok := model.Clone(m).(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("cannot clone model %T", m)
	}
	if err := c.Get(ctx, found); err != nil {
		var zero T
		return zero, err
	}
	return found, nil
}

// Find returns copies of every cached row of T's table for which pred is true.
func Find[T model.Model](ctx context.Context, c client.Client, pred func(T) bool) ([]T, error) {
	var found []T
	if err := c.WhereCache(pred).List(ctx, &found); err != nil {
		return nil, err
	}
	return found, nil
}

// CreateOrUpdateOps appends the operations that make m exist: an update of the row found by
// m's UUID or by a schema index, else an insert. fields (pointers into m) limit the update
// to those columns; without fields every non-default column of m is written (so a field
// cannot be cleared without naming it). On return m's UUID is the existing row's UUID or a
// named UUID, so later operations of the same transaction can reference it.
//
// Tables without a schema index (Logical_Switch, ACL, ...) cannot be looked up this way and
// would get a duplicate row on every call; for them use CreateOrUpdateWithPredicateOps.
// Rows of non-root tables (Logical_Switch_Port, ACL, NAT, ...) must be referenced from their
// parent in the same transaction (see MutateOps), or OVSDB garbage-collects them at commit.
func CreateOrUpdateOps[T model.Model](ctx context.Context, c client.Client, ops []ovsdb.Operation, m T, fields ...interface{}) ([]ovsdb.Operation, error) {
	info, err := modelInfo(c, m)
	if err != nil {
		return nil, err
	}
	uuid, _ := info.FieldByColumn("_uuid")
	indexes := c.Cache().DatabaseModel().Schema.Table(info.Metadata.TableName).Indexes
	if !ovsdb.IsValidUUID(uuid.(string)) && len(indexes) == 0 {
		return nil, fmt.Errorf("%s has no schema index and %T has no UUID: use CreateOrUpdateWithPredicateOps", info.Metadata.TableName, m)
	}
	existing, err := Get(ctx, c, m)
	switch {
	case errors.Is(err, ErrNotFound):
		return createOps(c, ops, m, info)
	case err != nil:
		return nil, fmt.Errorf("looking up %s: %w", info.Metadata.TableName, err)
	}
	return updateOps(c, ops, m, info, existing, fields)
}

// CreateOrUpdateWithPredicateOps is CreateOrUpdateOps for rows found by pred, typically
// OwnedBy or a name match. More than one match is an error rather than a guess: duplicates
// are for the garbage collector to remove.
func CreateOrUpdateWithPredicateOps[T model.Model](ctx context.Context, c client.Client, ops []ovsdb.Operation, m T, pred func(T) bool, fields ...interface{}) ([]ovsdb.Operation, error) {
	info, err := modelInfo(c, m)
	if err != nil {
		return nil, err
	}
	found, err := Find(ctx, c, pred)
	if err != nil {
		return nil, fmt.Errorf("looking up %s: %w", info.Metadata.TableName, err)
	}
	switch len(found) {
	case 0:
		return createOps(c, ops, m, info)
	case 1:
		return updateOps(c, ops, m, info, found[0], fields)
	default:
		return nil, fmt.Errorf("%d %s rows match, expected at most one", len(found), info.Metadata.TableName)
	}
}

// createOps appends an insert of m, giving it a named UUID if it has none.
func createOps(c client.Client, ops []ovsdb.Operation, m model.Model, info *mapper.Info) ([]ovsdb.Operation, error) {
	if uuid, _ := info.FieldByColumn("_uuid"); uuid.(string) == "" {
		if err := info.SetField("_uuid", NewNamedUUID()); err != nil {
			return nil, err
		}
	}
	insert, err := c.Create(m)
	if err != nil {
		return nil, fmt.Errorf("building insert into %s: %w", info.Metadata.TableName, err)
	}
	return append(ops, insert...), nil
}

// updateOps appends an update of existing's row with m's columns, adopting its UUID.
func updateOps(c client.Client, ops []ovsdb.Operation, m model.Model, info *mapper.Info, existing model.Model, fields []interface{}) ([]ovsdb.Operation, error) {
	existingInfo, err := modelInfo(c, existing)
	if err != nil {
		return nil, err
	}
	uuid, _ := existingInfo.FieldByColumn("_uuid")
	if err := info.SetField("_uuid", uuid); err != nil {
		return nil, err
	}
	update, err := c.Where(m).Update(m, fields...)
	if err != nil {
		return nil, fmt.Errorf("building update of %s %s: %w", info.Metadata.TableName, uuid, err)
	}
	return append(ops, update...), nil
}

// DeleteOps appends deletes of the rows matching ms (by UUID or schema index). Rows already
// gone are skipped, so deleting is idempotent. Rows referenced strongly elsewhere (a port
// still listed by its switch) must also be removed from the referrer in the same
// transaction, or the server rejects it.
func DeleteOps[T model.Model](ctx context.Context, c client.Client, ops []ovsdb.Operation, ms ...T) ([]ovsdb.Operation, error) {
	for _, m := range ms {
		existing, err := Get(ctx, c, m)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		del, err := c.Where(existing).Delete()
		if err != nil {
			return nil, fmt.Errorf("building delete of %T: %w", m, err)
		}
		ops = append(ops, del...)
	}
	return ops, nil
}

// DeleteWithPredicateOps appends deletes of every cached row of T's table matching pred;
// with OwnedBy it is the garbage-collection step.
func DeleteWithPredicateOps[T model.Model](c client.Client, ops []ovsdb.Operation, pred func(T) bool) ([]ovsdb.Operation, error) {
	del, err := c.WhereCache(pred).Delete()
	if err != nil {
		return nil, fmt.Errorf("building deletes for %T: %w", pred, err)
	}
	return append(ops, del...), nil
}

// MutateOps appends mutations of the row matching m (by UUID or schema index), e.g.
// inserting a port's UUID into Logical_Switch.ports without rewriting the whole set.
func MutateOps[T model.Model](c client.Client, ops []ovsdb.Operation, m T, mutations ...model.Mutation) ([]ovsdb.Operation, error) {
	info, err := modelInfo(c, m)
	if err != nil {
		return nil, err
	}
	// A model inserted by an earlier transaction still carries that transaction's named
	// UUID; the server would match no row and the mutation would silently do nothing.
	if uuid, _ := info.FieldByColumn("_uuid"); ovsdb.IsNamedUUID(uuid.(string)) &&
		!slices.ContainsFunc(ops, func(op ovsdb.Operation) bool { return op.UUIDName == uuid }) {
		return nil, fmt.Errorf("%s row has named UUID %s, which no insert in this transaction defines: re-read it from the cache", info.Metadata.TableName, uuid)
	}
	mut, err := c.Where(m).Mutate(m, mutations...)
	if err != nil {
		return nil, fmt.Errorf("building mutation of %T: %w", m, err)
	}
	return append(ops, mut...), nil
}

// modelInfo returns libovsdb's reflection of m (table name, column to field mapping).
func modelInfo(c client.Client, m model.Model) (*mapper.Info, error) {
	info, err := c.Cache().DatabaseModel().NewModelInfo(m)
	if err != nil {
		return nil, fmt.Errorf("%T is not a model of %s: %w", m, c.Schema().Name, err)
	}
	return info, nil
}
