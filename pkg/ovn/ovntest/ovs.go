package ovntest

import (
	"context"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// ServeOVS serves an in-memory Open_vSwitch database holding what a node's bootstrap leaves:
// the root row (with rootIDs as its external_ids) and bridge (userspace datapath). It returns
// a client whose cache holds both, and the endpoint for more clients (ConnectOVS).
func ServeOVS(t testing.TB, bridge string, rootIDs map[string]string) (client.Client, string) {
	t.Helper()
	dbModel, err := vswitch.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := Serve(t, SocketPath(t), dbModel)
	c := ConnectOVS(t, endpoint)
	br := &vswitch.Bridge{UUID: ovn.NewNamedUUID(), Name: bridge, DatapathType: "netdev"}
	root := &vswitch.OpenvSwitch{UUID: ovn.NewNamedUUID(), Bridges: []string{br.UUID}, ExternalIDs: rootIDs}
	ops, err := c.Create(br, root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ovn.Transact(ctx, c, ops); err != nil {
		t.Fatalf("bootstrapping Open_vSwitch: %v", err)
	}
	for {
		if _, err := ovn.Get(ctx, c, &vswitch.Bridge{Name: bridge}); err == nil {
			return c, endpoint
		}
		if ctx.Err() != nil {
			t.Fatalf("%s not in the client cache", bridge)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ConnectOVS connects a client to an Open_vSwitch database at endpoint, closed at the end of
// the test.
func ConnectOVS(t testing.TB, endpoint string) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovn.ConnectOVS(ctx, ovn.Config{Endpoints: []string{endpoint}, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("ConnectOVS: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
