package ovn_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// A dump read through libovsdb and encoded as JSON decodes back into the typed rows that
// were written, and names only the tables asked for.
func TestDumpRoundTrip(t *testing.T) {
	endpoint := ovntest.ServeNB(t)
	c := connectNB(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Router ports are not a root table: they live as long as a router lists them.
	router := &nb.LogicalRouter{Name: "r"}
	var ops []ovsdb.Operation
	for _, p := range []*nb.LogicalRouterPort{
		{Name: "rtos-a", MAC: "0a:00:00:00:00:01", Networks: []string{"10.1.0.1/24", "fd00:1::1/64"}},
		{Name: "rtos-b", MAC: "0a:00:00:00:00:02", Networks: []string{"10.2.0.1/24"}, ExternalIDs: map[string]string{"kovn.io/owner": "b"}},
	} {
		var err error
		if ops, err = ovn.CreateOrUpdateOps(ctx, c, ops, p); err != nil {
			t.Fatal(err)
		}
		router.Ports = append(router.Ports, p.UUID) // the named UUID of this transaction
	}
	ops, err := ovn.CreateOrUpdateWithPredicateOps(ctx, c, ops, router, func(r *nb.LogicalRouter) bool { return r.Name == "r" })
	mustTransact(t, c, ops, err)

	dump, err := ovn.Dump(ctx, "nb", fastCfg(endpoint), "Logical_Router_Port", "NB_Global")
	if err != nil {
		t.Fatal(err)
	}
	if len(dump) != 2 {
		t.Fatalf("dump of 2 tables has %d", len(dump))
	}
	encoded, err := json.Marshal(dump)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(encoded, &raw); err != nil {
		t.Fatal(err)
	}
	ports, err := ovn.DecodeRows[nb.LogicalRouterPort](raw, "Logical_Router_Port")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]nb.LogicalRouterPort{}
	for _, p := range ports {
		byName[p.Name] = p
	}
	if len(ports) != 2 || byName["rtos-a"].MAC != "0a:00:00:00:00:01" || len(byName["rtos-a"].Networks) != 2 ||
		byName["rtos-b"].ExternalIDs["kovn.io/owner"] != "b" || byName["rtos-a"].UUID == "" {
		t.Fatalf("decoded rows %+v", ports)
	}
	if _, err := ovn.DecodeRows[nb.LogicalSwitch](raw, "Logical_Switch"); err == nil {
		t.Fatal("a table outside the dump decoded without error")
	}
	if _, err := ovn.Dump(ctx, "nb", fastCfg(endpoint), "No_Such_Table"); err == nil {
		t.Fatal("dump of a missing table succeeded")
	}
	if _, err := ovn.Dump(ctx, "xx", fastCfg(endpoint)); err == nil {
		t.Fatal("dump of an unknown database succeeded")
	}
	all, err := ovn.Dump(ctx, "nb", fastCfg(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	if len(all["Logical_Router_Port"]) != 2 || len(all) < 20 {
		t.Fatalf("full dump: %d tables, %d router ports", len(all), len(all["Logical_Router_Port"]))
	}
}
