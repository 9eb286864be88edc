package ovn_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// waitNBGlobal waits until c's cache shows NB_Global as ok says (the cache follows the
// server's update notification, not the transaction reply).
func waitNBGlobal(t *testing.T, c client.Client, ok func(*nb.NBGlobal) bool) *nb.NBGlobal {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		row, err := ovn.GlobalRow[*nb.NBGlobal](context.Background(), c)
		if err == nil && ok(row) {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("NB_Global: %+v, %v", row, err)
		}
	}
}

// TestUpdateGlobal: keys set and removed, other writers' keys untouched, a column updated,
// and no operation when nothing changes.
func TestUpdateGlobal(t *testing.T) {
	ctx := context.Background()
	c := connectNB(t, ovntest.ServeNB(t))
	ovntest.CreateNBGlobal(t, c)
	other := map[string]string{"northd-probe": "5000", "drop": "x", "change": "old"}
	_, err := ovn.UpdateGlobal(ctx, c, func(m *nb.NBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.Options, m.Options, other, nil)}
	})
	if err != nil {
		t.Fatal(err)
	}
	waitNBGlobal(t, c, func(g *nb.NBGlobal) bool { return maps.Equal(g.Options, other) })

	change := func(m *nb.NBGlobal) ovn.GlobalChange {
		m.Name = "az1"
		return ovn.GlobalChange{
			Mutations: ovn.MapMutations(&m.Options, m.Options, map[string]string{"change": "new", "add": "y"}, []string{"drop", "absent"}),
			Updates:   []interface{}{&m.Name},
		}
	}
	before, err := ovn.UpdateGlobal(ctx, c, change)
	if err != nil {
		t.Fatal(err)
	}
	if before.Name != "" || !maps.Equal(before.Options, other) {
		t.Errorf("returned row %+v, want the row as read before the change", before)
	}
	want := map[string]string{"northd-probe": "5000", "change": "new", "add": "y"}
	waitNBGlobal(t, c, func(g *nb.NBGlobal) bool { return g.Name == "az1" && maps.Equal(g.Options, want) })

	// The same change again: MapMutations finds nothing to do, and neither is the name
	// rewritten when the change leaves Updates empty.
	ops, _, err := ovn.UpdateGlobalOps(ctx, c, nil, func(m *nb.NBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.Options, m.Options, map[string]string{"change": "new", "add": "y"}, []string{"drop"})}
	})
	if err != nil || len(ops) != 0 {
		t.Errorf("nothing to change: ops %v, err %v", ops, err)
	}
}

// TestUpdateGlobalOpsAppends: the operations join the caller's, to be committed with them.
func TestUpdateGlobalOpsAppends(t *testing.T) {
	ctx := context.Background()
	c := connectNB(t, ovntest.ServeNB(t))
	ovntest.CreateNBGlobal(t, c)
	ops, err := ovn.CreateOrUpdateWithPredicateOps(ctx, c, nil, &nb.LogicalSwitch{Name: "ls1"}, func(ls *nb.LogicalSwitch) bool { return ls.Name == "ls1" })
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err = ovn.UpdateGlobalOps(ctx, c, ops, func(m *nb.NBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: []model.Mutation{{Field: &m.NbCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1}}}
	})
	if err != nil || len(ops) != 2 || ops[1].Op != ovsdb.OperationMutate {
		t.Fatalf("ops %v, err %v: want the insert, then the mutation", ops, err)
	}
	mustTransact(t, c, ops, nil)
	waitNBGlobal(t, c, func(g *nb.NBGlobal) bool { return g.NbCfg == 1 })
	if n := len(allSwitches(t, c)); n != 1 {
		t.Errorf("%d switches, want 1", n)
	}
}

// TestUpdateGlobalWithoutRow: a database whose global row nobody created yet is
// ErrNoGlobalRow, with the message callers have always returned.
func TestUpdateGlobalWithoutRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := icnb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := ovntest.Serve(t, ovntest.SocketPath(t), db)
	c, err := ovn.ConnectICNB(ctx, fastCfg(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	called := false
	_, err = ovn.UpdateGlobal(ctx, c, func(*icnb.ICNBGlobal) ovn.GlobalChange { called = true; return ovn.GlobalChange{} })
	if !errors.Is(err, ovn.ErrNoGlobalRow) || err.Error() != "IC_NB_Global has 0 rows, want 1" || called {
		t.Errorf("UpdateGlobal on an empty IC-NB = %v (change called: %v), want ErrNoGlobalRow", err, called)
	}
}
