package ovn

import (
	"context"
	"fmt"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// BumpNextCfgOps appends an increment of Open_vSwitch next_cfg and a select of its new value,
// which is then the transaction's last result (pass it to AwaitCurCfg). bumped is false when
// the database has no Open_vSwitch row (nothing to wait for then).
//
// ovs-vswitchd copies next_cfg to cur_cfg only after a complete reconfiguration, so waiting
// for cur_cfg to reach the bumped value is waiting for every change written so far to be
// applied, as ovs-vsctl does.
func BumpNextCfgOps(ctx context.Context, c libovsdb.Client, ops []ovsdb.Operation) (_ []ovsdb.Operation, bumped bool, _ error) {
	roots, err := Find(ctx, c, func(*vswitch.OpenvSwitch) bool { return true })
	if err != nil || len(roots) != 1 {
		return ops, false, err
	}
	root := roots[0]
	ops, err = MutateOps(c, ops, root, model.Mutation{Field: &root.NextCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1})
	if err != nil {
		return nil, false, err
	}
	return append(ops, ovsdb.Operation{
		Op: ovsdb.OperationSelect, Table: vswitch.OpenvSwitchTable, Columns: []string{"next_cfg"},
		Where: []ovsdb.Condition{{Column: "_uuid", Function: ovsdb.ConditionEqual, Value: ovsdb.UUID{GoUUID: root.UUID}}},
	}), true, nil
}

// AwaitCurCfg waits until Open_vSwitch cur_cfg reaches the next_cfg selected in sel (the last
// result of a transaction built with BumpNextCfgOps), at most timeout.
func AwaitCurCfg(ctx context.Context, c libovsdb.Client, sel ovsdb.OperationResult, timeout time.Duration) error {
	if len(sel.Rows) != 1 {
		return fmt.Errorf("reading next_cfg back: %d rows", len(sel.Rows))
	}
	var next int
	switch v := sel.Rows[0]["next_cfg"].(type) {
	case float64:
		next = int(v)
	case int:
		next = v
	default:
		return fmt.Errorf("next_cfg read back as %T", v)
	}
	deadline := time.Now().Add(timeout)
	for {
		roots, err := Find(ctx, c, func(r *vswitch.OpenvSwitch) bool { return r.CurCfg >= next })
		if err == nil && len(roots) > 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("ovs-vswitchd has not applied configuration %d after %s", next, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AwaitVswitchd returns once ovs-vswitchd has applied every change written so far (see
// BumpNextCfgOps), at most timeout.
func AwaitVswitchd(ctx context.Context, c libovsdb.Client, timeout time.Duration) error {
	ops, bumped, err := BumpNextCfgOps(ctx, c, nil)
	if err != nil {
		return err
	}
	if !bumped {
		return fmt.Errorf("no Open_vSwitch row")
	}
	res, err := Transact(ctx, c, ops)
	if err != nil {
		return err
	}
	return AwaitCurCfg(ctx, c, res[len(res)-1], timeout)
}

// OpenVSwitchRoot is the Open_vSwitch table's one row, from c's cache.
func OpenVSwitchRoot(ctx context.Context, c libovsdb.Client) (*vswitch.OpenvSwitch, error) {
	var rows []vswitch.OpenvSwitch
	if err := c.List(ctx, &rows); err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("Open_vSwitch table has %d rows, want 1", len(rows))
	}
	return &rows[0], nil
}
