package ovn_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

func allPorts(t *testing.T, c client.Client) []*nb.LogicalSwitchPort {
	t.Helper()
	ports, err := ovn.Find(context.Background(), c, func(*nb.LogicalSwitchPort) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func allSwitches(t *testing.T, c client.Client) []*nb.LogicalSwitch {
	t.Helper()
	switches, err := ovn.Find(context.Background(), c, func(*nb.LogicalSwitch) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	return switches
}

func mustTransact(t *testing.T, c client.Client, ops []ovsdb.Operation, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("building ops: %v", err)
	}
	if _, err := ovn.Transact(context.Background(), c, ops); err != nil {
		t.Fatalf("Transact: %v", err)
	}
}

// addPortOps creates (or updates) port on sw and makes sure sw lists it, in one transaction.
func addPortOps(t *testing.T, c client.Client, sw *nb.LogicalSwitch, port *nb.LogicalSwitchPort) []ovsdb.Operation {
	t.Helper()
	ctx := context.Background()
	ops, err := ovn.CreateOrUpdateWithPredicateOps(ctx, c, nil, sw, func(ls *nb.LogicalSwitch) bool { return ls.Name == sw.Name })
	if err != nil {
		t.Fatal(err)
	}
	ops, err = ovn.CreateOrUpdateOps(ctx, c, ops, port)
	if err != nil {
		t.Fatal(err)
	}
	// port.UUID is now the row's UUID or a named UUID valid inside this transaction.
	ops, err = ovn.MutateOps(c, ops, sw, model.Mutation{Field: &sw.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{port.UUID}})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestCreateOrUpdateIsIdempotent(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	ctx := context.Background()

	sw := &nb.LogicalSwitch{Name: "ls1"}
	port := &nb.LogicalSwitchPort{Name: "p1", Addresses: []string{"0a:58:0a:00:00:05 10.0.0.5"}}
	mustTransact(t, c, addPortOps(t, c, sw, port), nil)
	ports := allPorts(t, c)
	if len(ports) != 1 {
		t.Fatalf("after first run: %d ports, want 1", len(ports))
	}
	firstUUID := ports[0].UUID
	if switches := allSwitches(t, c); len(switches) != 1 || len(switches[0].Ports) != 1 || switches[0].Ports[0] != firstUUID {
		t.Fatalf("after first run: switches = %+v, want ls1 listing port %s", switches, firstUUID)
	}

	// Same desired state with a changed address, fresh structs as a reconcile would build.
	sw2 := &nb.LogicalSwitch{Name: "ls1"}
	port2 := &nb.LogicalSwitchPort{Name: "p1", Addresses: []string{"0a:58:0a:00:00:06 10.0.0.6"}}
	mustTransact(t, c, addPortOps(t, c, sw2, port2), nil)
	if port2.UUID != firstUUID {
		t.Fatalf("second run used UUID %q, want the existing row's %q", port2.UUID, firstUUID)
	}
	ports = allPorts(t, c)
	if len(ports) != 1 || ports[0].UUID != firstUUID || ports[0].Addresses[0] != "0a:58:0a:00:00:06 10.0.0.6" {
		t.Fatalf("after second run: ports = %+v, want one p1 with the new address", ports)
	}
	if switches := allSwitches(t, c); len(switches) != 1 || len(switches[0].Ports) != 1 {
		t.Fatalf("after second run: switches = %+v, want one ls1 with one port", switches)
	}

	// Fields restrict the update: only Type is written, Addresses stay.
	port3 := &nb.LogicalSwitchPort{Name: "p1", Type: "localnet"}
	ops, err := ovn.CreateOrUpdateOps(ctx, c, nil, port3, &port3.Type)
	mustTransact(t, c, ops, err)
	got, err := ovn.Get(ctx, c, &nb.LogicalSwitchPort{Name: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != "localnet" || len(got.Addresses) != 1 {
		t.Fatalf("after field update: port = %+v, want type localnet and the address kept", got)
	}
}

func TestCreateOrUpdateNeedsLookupKey(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	// Logical_Switch has no schema index: without a UUID or predicate every call would
	// insert a new switch, so the helper refuses.
	_, err := ovn.CreateOrUpdateOps(context.Background(), c, nil, &nb.LogicalSwitch{Name: "ls1"})
	if err == nil || !strings.Contains(err.Error(), "CreateOrUpdateWithPredicateOps") {
		t.Fatalf("CreateOrUpdateOps on an unindexed table = %v, want an error", err)
	}
}

func TestCreateOrUpdateWithPredicateRejectsDuplicates(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	ctx := context.Background()
	// Two switches of the same name can exist (no index); the helper must not pick one.
	ops, err := c.Create(&nb.LogicalSwitch{Name: "dup"}, &nb.LogicalSwitch{Name: "dup"})
	mustTransact(t, c, ops, err)
	_, err = ovn.CreateOrUpdateWithPredicateOps(ctx, c, nil, &nb.LogicalSwitch{Name: "dup"},
		func(ls *nb.LogicalSwitch) bool { return ls.Name == "dup" })
	if err == nil || !strings.Contains(err.Error(), "2 Logical_Switch rows match") {
		t.Fatalf("CreateOrUpdateWithPredicateOps with two matches = %v, want an error", err)
	}
}

func TestDelete(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	ctx := context.Background()
	sw := &nb.LogicalSwitch{Name: "ls1"}
	mustTransact(t, c, addPortOps(t, c, sw, &nb.LogicalSwitchPort{Name: "p1"}), nil)
	mustTransact(t, c, addPortOps(t, c, &nb.LogicalSwitch{Name: "ls1"}, &nb.LogicalSwitchPort{Name: "p2"}), nil)
	if n := len(allPorts(t, c)); n != 2 {
		t.Fatalf("%d ports before delete, want 2", n)
	}

	// Delete p1 by name and unlist it from the switch in the same transaction. The switch is
	// read back from the cache: sw still carries the named UUID of the transaction that
	// created it, which means nothing in a later transaction.
	p1, err := ovn.Get(ctx, c, &nb.LogicalSwitchPort{Name: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ovn.MutateOps(c, nil, sw, model.Mutation{Field: &sw.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{p1.UUID}})
	if err == nil || !strings.Contains(err.Error(), "re-read it from the cache") {
		t.Fatalf("MutateOps with a stale named UUID = %v, want an error", err)
	}
	sw = allSwitches(t, c)[0]
	ops, err := ovn.DeleteOps(ctx, c, nil, &nb.LogicalSwitchPort{Name: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	ops, err = ovn.MutateOps(c, ops, sw, model.Mutation{Field: &sw.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{p1.UUID}})
	mustTransact(t, c, ops, err)

	ports := allPorts(t, c)
	if len(ports) != 1 || ports[0].Name != "p2" {
		t.Fatalf("after delete: ports = %+v, want only p2", ports)
	}
	if _, err := ovn.Get(ctx, c, &nb.LogicalSwitchPort{Name: "p1"}); !errors.Is(err, ovn.ErrNotFound) {
		t.Fatalf("Get(p1) after delete = %v, want ErrNotFound", err)
	}
	if switches := allSwitches(t, c); len(switches) != 1 || len(switches[0].Ports) != 1 || switches[0].Ports[0] != ports[0].UUID {
		t.Fatalf("after delete: switch = %+v, want it to list only p2", switches)
	}

	// Deleting again is a no-op, not an error.
	ops, err = ovn.DeleteOps(ctx, c, nil, &nb.LogicalSwitchPort{Name: "p1"})
	if err != nil || len(ops) != 0 {
		t.Fatalf("second DeleteOps = %v, %v; want no ops and no error", ops, err)
	}
}

func TestOwnedByFindsOnlyOwnedRows(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	ctx := context.Background()
	rows := []*nb.LogicalSwitch{
		{Name: "a", ExternalIDs: ovn.OwnerIDs("Subnet", "a", map[string]string{"other": "x"})},
		{Name: "b", ExternalIDs: ovn.OwnerIDs("Subnet", "b", nil)},
		{Name: "vpc-a", ExternalIDs: ovn.OwnerIDs("Vpc", "a", nil)},
		{Name: "foreign", ExternalIDs: map[string]string{"k8s.ovn.org/owner": "a"}},
		{Name: "bare"},
	}
	var ops []ovsdb.Operation
	for _, ls := range rows {
		var err error
		ops, err = ovn.CreateOrUpdateWithPredicateOps(ctx, c, ops, ls, func(got *nb.LogicalSwitch) bool { return got.Name == ls.Name })
		if err != nil {
			t.Fatal(err)
		}
	}
	mustTransact(t, c, ops, nil)

	names := func(pred func(*nb.LogicalSwitch) bool) string {
		found, err := ovn.Find(ctx, c, pred)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, ls := range found {
			n = append(n, ls.Name)
		}
		sort.Strings(n)
		return strings.Join(n, ",")
	}
	for _, tt := range []struct{ ownerType, owner, want string }{
		{"Subnet", "a", "a"},
		{"Subnet", "b", "b"},
		{"Subnet", "", "a,b"},
		{"Vpc", "a", "vpc-a"},
		{"Subnet", "c", ""},
		{"Pod", "", ""},
	} {
		if got := names(ovn.OwnedBy[*nb.LogicalSwitch](tt.ownerType, tt.owner)); got != tt.want {
			t.Errorf("OwnedBy(%q, %q) found %q, want %q", tt.ownerType, tt.owner, got, tt.want)
		}
	}

	// Garbage collection of every Subnet-owned switch leaves the other rows alone.
	ops, err := ovn.DeleteWithPredicateOps(c, nil, ovn.OwnedBy[*nb.LogicalSwitch]("Subnet", ""))
	mustTransact(t, c, ops, err)
	if got := names(func(*nb.LogicalSwitch) bool { return true }); got != "bare,foreign,vpc-a" {
		t.Fatalf("after GC: switches %q, want bare,foreign,vpc-a", got)
	}
}

func TestOwnerHelpers(t *testing.T) {
	ls := &nb.LogicalSwitch{ExternalIDs: map[string]string{"keep": "me", ovn.OwnerKey: "stale"}}
	if err := ovn.SetOwner(ls, "Subnet", "default/net1"); err != nil {
		t.Fatal(err)
	}
	typ, owner, ok := ovn.OwnerOf(ls.ExternalIDs)
	if !ok || typ != "Subnet" || owner != "default/net1" || ls.ExternalIDs["keep"] != "me" {
		t.Fatalf("after SetOwner: external_ids %v", ls.ExternalIDs)
	}
	if _, _, ok := ovn.OwnerOf(map[string]string{"keep": "me"}); ok {
		t.Fatal("OwnerOf reports an owner for a row without ownership keys")
	}
	if err := ovn.SetOwner(&nb.LoadBalancerGroup{}, "Subnet", "x"); err == nil {
		t.Fatal("SetOwner on a model without external_ids succeeded")
	}
}

func TestFailingTransactionNamesOperation(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	ctx := context.Background()
	mustTransact(t, c, addPortOps(t, c, &nb.LogicalSwitch{Name: "ls1"}, &nb.LogicalSwitchPort{Name: "p1"}), nil)

	// A guard that does not hold ("p1 is of type router") fails its operation; the update
	// after it must not be applied.
	zero := 0
	want := &nb.LogicalSwitchPort{Name: "p1", Type: "router"}
	guard, err := c.Where(want).Wait(ovsdb.WaitConditionEqual, &zero, want, &want.Type)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ovn.CreateOrUpdateOps(ctx, c, guard, &nb.LogicalSwitchPort{Name: "p1", Addresses: []string{"unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ovn.Transact(ctx, c, ops)
	if err == nil {
		t.Fatal("transaction with a failing wait succeeded")
	}
	if !strings.Contains(err.Error(), "operation 1 of 2 (wait Logical_Switch_Port where _uuid == ") {
		t.Fatalf("error %q does not name the failing operation", err)
	}
	var timedOut *ovsdb.TimedOut
	if !errors.As(err, &timedOut) {
		t.Fatalf("error %q does not wrap *ovsdb.TimedOut", err)
	}
	if p1, err := ovn.Get(ctx, c, &nb.LogicalSwitchPort{Name: "p1"}); err != nil || len(p1.Addresses) != 0 {
		t.Fatalf("p1 after a failed transaction = %+v, %v; want it unchanged", p1, err)
	}

	// A commit-time failure, here a second address set of the same name violating the
	// schema index (as when another writer got there first), is reported too, with
	// libovsdb's typed error available to errors.As.
	as := &nb.AddressSet{Name: "pods", Addresses: []string{"10.0.0.5"}}
	ops, err = ovn.CreateOrUpdateOps(ctx, c, nil, as)
	mustTransact(t, c, ops, err)
	ops, err = c.Create(&nb.AddressSet{Name: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ovn.Transact(ctx, c, ops)
	var violation *ovsdb.ConstraintViolation
	if !errors.As(err, &violation) {
		t.Fatalf("duplicate index: error %v, want an *ovsdb.ConstraintViolation", err)
	}
	if !strings.Contains(err.Error(), "pods") {
		t.Fatalf("duplicate index: error %q does not name the conflicting value", err)
	}
	sets, err := ovn.Find(ctx, c, func(*nb.AddressSet) bool { return true })
	if err != nil || len(sets) != 1 || len(sets[0].Addresses) != 1 {
		t.Fatalf("address sets after the failed transaction: %+v, %v; want the first one only", sets, err)
	}
}

func TestTransactEmptyIsNoop(t *testing.T) {
	c := connectNB(t, ovntest.ServeNB(t))
	if res, err := ovn.Transact(context.Background(), c, nil); res != nil || err != nil {
		t.Fatalf("Transact(nil) = %v, %v; want nil, nil", res, err)
	}
}
