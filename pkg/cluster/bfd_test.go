package cluster

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// TestEnsureGatewayBFD: the missing timers are written, a value already there (an
// InterConnect's bfd-mult) and other options stay.
func TestEnsureGatewayBFD(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := ovn.ConnectNB(ctx, ovn.Config{Endpoints: []string{ovntest.ServeNB(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ovntest.CreateNBGlobal(t, c)
	var rows []nb.NBGlobal
	if err := c.List(ctx, &rows); err != nil || len(rows) != 1 {
		t.Fatalf("NB_Global: %v", err)
	}
	row := rows[0]
	row.Options = map[string]string{"bfd-mult": "4", "northd-probe": "5000"}
	ops, _ := c.Where(&row).Update(&row, &row.Options)
	if _, err := ovn.Transact(ctx, c, ops); err != nil {
		t.Fatal(err)
	}
	if err := EnsureGatewayBFD(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bfd-min-rx": "100", "bfd-min-tx": "100", "bfd-mult": "4", "northd-probe": "5000"}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rows = nil
		if err := c.List(ctx, &rows); err == nil && len(rows) == 1 && maps.Equal(rows[0].Options, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("options %v, want %v", rows, want)
		}
	}
}
