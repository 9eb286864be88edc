package ovn

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// ErrNoGlobalRow is returned when a global table (NB_Global, IC_NB_Global, ...) has no row
// yet: the daemon owning the database (ovn-northd, ovn-ic) creates it when it first connects.
// Every schema caps these tables at one row, so "none" is the only other case.
var ErrNoGlobalRow = errors.New("no row")

// GlobalChange is what a change of a global row writes. Mutations (map mutations built with
// MapMutations, or an integer add) leave every key another writer owns alone; Updates
// overwrite whole columns and are pointers into the copy the change was given, after the
// change set them. An empty change writes nothing.
type GlobalChange struct {
	Mutations []model.Mutation
	Updates   []interface{}
}

// GlobalRow returns a copy of the one row of T's global table, or an error wrapping
// ErrNoGlobalRow ("NB_Global has 0 rows, want 1").
func GlobalRow[T model.Model](ctx context.Context, c client.Client) (T, error) {
	var zero T
	var rows []T
	if err := c.List(ctx, &rows); err != nil {
		return zero, err
	}
	if len(rows) != 1 {
		return zero, rowCountError{table: c.Cache().DatabaseModel().FindTable(reflect.TypeOf(zero)), rows: len(rows)}
	}
	return rows[0], nil
}

// rowCountError says how many rows a global table has; with none it is ErrNoGlobalRow.
type rowCountError struct {
	table string
	rows  int
}

func (e rowCountError) Error() string { return fmt.Sprintf("%s has %d rows, want 1", e.table, e.rows) }

func (e rowCountError) Is(target error) bool { return target == ErrNoGlobalRow && e.rows == 0 }

// UpdateGlobalOps reads the one row of T's global table and appends the operations change
// builds from it: the mutations first, then the update. change gets a copy of the row to read
// the current values from and to point the mutations and updates into. It returns the row as
// read (before the change), so callers can still look at it when nothing needed writing.
func UpdateGlobalOps[T model.Model](ctx context.Context, c client.Client, ops []ovsdb.Operation, change func(row T) GlobalChange) ([]ovsdb.Operation, T, error) {
	row, err := GlobalRow[T](ctx, c)
	if err != nil {
		return ops, row, err
	}
	changed, ok := model.Clone(row).(T)
	if !ok {
		return ops, row, fmt.Errorf("cannot clone model %T", row)
	}
	ch := change(changed)
	if len(ch.Mutations) > 0 {
		if ops, err = MutateOps(c, ops, changed, ch.Mutations...); err != nil {
			return ops, row, err
		}
	}
	if len(ch.Updates) > 0 {
		update, err := c.Where(changed).Update(changed, ch.Updates...)
		if err != nil {
			return ops, row, fmt.Errorf("building update of %T: %w", changed, err)
		}
		ops = append(ops, update...)
	}
	return ops, row, nil
}

// UpdateGlobal is UpdateGlobalOps committed in its own transaction; nothing is sent when the
// change is empty.
func UpdateGlobal[T model.Model](ctx context.Context, c client.Client, change func(row T) GlobalChange) (T, error) {
	ops, row, err := UpdateGlobalOps(ctx, c, nil, change)
	if err != nil {
		return row, err
	}
	_, err = Transact(ctx, c, ops)
	return row, err
}
