package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// TestGatewayHealth: Bound names the chassis OVN bound a health port's chassisredirect
// binding to, follows a rebinding, and each change queues the subnet the port belongs to;
// other bindings queue nothing. The follower moves the subnet's egress to the bound node, the
// binding present at start included (a standby that connects after the failover must apply it).
func TestGatewayHealth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	ep := ovntest.Serve(t, ovntest.SocketPath(t), db)
	full, err := sb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	writer, err := ovn.Connect(ctx, full, ovn.Config{Endpoints: []string{ep}})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	n2 := &sb.Chassis{UUID: ovn.NewNamedUUID(), Name: "n2", Hostname: "n2"}
	n3 := &sb.Chassis{UUID: ovn.NewNamedUUID(), Name: "n3", Hostname: "n3"}
	dp := &sb.DatapathBinding{UUID: ovn.NewNamedUUID(), TunnelKey: 1}
	cr := &sb.PortBinding{UUID: ovn.NewNamedUUID(), LogicalPort: "cr-kovn-gwh-central", Type: "chassisredirect",
		Datapath: dp.UUID, TunnelKey: 1, Chassis: &n2.UUID}
	other := &sb.PortBinding{UUID: ovn.NewNamedUUID(), LogicalPort: "cr-az1-kovn-ts", Type: "chassisredirect",
		Datapath: dp.UUID, TunnelKey: 2, Chassis: &n3.UUID}
	var ops []ovsdb.Operation
	for _, m := range []any{n2, n3, dp, cr, other} {
		o, err := writer.Create(m)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	if _, err := ovn.Transact(ctx, writer, ops); err != nil {
		t.Fatal(err)
	}

	h := NewGatewayHealth([]string{ep})
	moves := make(chan string, 8)
	h.moveEgress = func(_ context.Context, subnet, node string) (int, error) {
		moves <- subnet + "->" + node
		return 1, nil
	}
	go func() { _ = h.Start(ctx) }()
	last := ""
	expectMove := func(want string) { // repeats of the last move are allowed: a binding may be queued twice
		t.Helper()
		for {
			select {
			case got := <-moves:
				if got == want {
					last = got
					return
				}
				if got != last {
					t.Fatalf("egress moved %s, want %s", got, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("egress not moved (%s)", want)
			}
		}
	}
	expect := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); h.Bound("kovn-gwh-central") != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Bound = %q, want %q", h.Bound("kovn-gwh-central"), want)
			}
		}
		select {
		case ev := <-h.events:
			if ev.Object.Name != "central" {
				t.Fatalf("event for %v, want subnet central", ev.Object)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event for subnet central")
		}
	}
	expect("n2")
	expectMove("central->n2")

	var pbs []*sb.PortBinding
	if err := writer.WhereCache(func(pb *sb.PortBinding) bool { return pb.LogicalPort == cr.LogicalPort }).List(ctx, &pbs); err != nil || len(pbs) != 1 {
		t.Fatalf("binding: %v %d", err, len(pbs))
	}
	var chassis []*sb.Chassis
	if err := writer.WhereCache(func(c *sb.Chassis) bool { return c.Name == "n3" }).List(ctx, &chassis); err != nil || len(chassis) != 1 {
		t.Fatalf("chassis n3: %v", err)
	}
	pbs[0].Chassis = &chassis[0].UUID
	o, err := writer.Where(pbs[0]).Update(pbs[0], &pbs[0].Chassis)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(ctx, writer, o); err != nil {
		t.Fatal(err)
	}
	expect("n3")
	expectMove("central->n3")
	select {
	case ev := <-h.events:
		t.Fatalf("unexpected event %v (only the health port's binding matters)", ev.Object)
	case <-time.After(200 * time.Millisecond):
	}
	if got := h.Bound("kovn-gwh-missing"); got != "" {
		t.Errorf("Bound of a port with no binding = %q", got)
	}
}
