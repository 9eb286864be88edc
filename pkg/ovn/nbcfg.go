package ovn

import (
	"context"
	"fmt"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// BumpNbCfg increments NB_Global.nb_cfg and returns the new value. Each ovn-controller writes
// the value to its Chassis_Private row once it has installed the flows of that configuration.
func BumpNbCfg(ctx context.Context, c client.Client) (int64, error) {
	ops, row, err := UpdateGlobalOps(ctx, c, nil, func(m *nb.NBGlobal) GlobalChange {
		return GlobalChange{Mutations: []model.Mutation{{Field: &m.NbCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1}}}
	})
	if err != nil {
		return 0, err
	}
	// Read the value back in the same transaction: the cache may lag another writer's bump.
	ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nb.NBGlobalTable,
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: row.UUID})}, Columns: []string{"nb_cfg"}})
	res, err := Transact(ctx, c, ops)
	if err != nil {
		return 0, err
	}
	if len(res) != 2 || len(res[1].Rows) != 1 {
		return 0, fmt.Errorf("reading NB_Global.nb_cfg back: unexpected reply %v", res)
	}
	switch v := res[1].Rows[0]["nb_cfg"].(type) {
	case float64:
		return int64(v), nil
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	default:
		return 0, fmt.Errorf("reading NB_Global.nb_cfg back: %T %v", v, v)
	}
}
