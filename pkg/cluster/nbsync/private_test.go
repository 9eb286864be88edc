package nbsync

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// privIn is a dual-stack private subnet on switch "priv".
func privIn(private bool, allow ...string) topology.SubnetIn {
	in := topology.SubnetIn{Name: "priv", Vpc: "ovn-cluster", Switch: "priv", CIDRs: []netip.Prefix{p("10.1.0.0/16"), p("fd00:1::/64")},
		Gateways: []netip.Addr{a("10.1.0.1"), a("fd00:1::1")}, Private: private}
	for _, c := range allow {
		in.AllowSubnets = append(in.AllowSubnets, p(c))
	}
	return in
}

// checkSwitchACLs checks that the switch lists exactly the subnet's ACLs as modelled (plus
// the extra UUIDs of other writers) and returns the subnet's rows by name.
func checkSwitchACLs(t *testing.T, c client.Client, sh topology.Shard, extra ...string) map[string]nb.ACL {
	t.Helper()
	rows := ownedACLs(t, c, "priv")
	want := slices.Clone(extra)
	for _, w := range sh.ACLs {
		r, ok := rows[w.Name]
		if !ok || r.Match != w.Match || r.Direction != w.Direction || r.Priority != w.Priority || r.Action != w.Action ||
			r.ExternalIDs[topology.SubnetRuleKey] != w.ExternalIDs[topology.SubnetRuleKey] ||
			!Owned(r.ExternalIDs, topology.OwnerSubnet, "priv") {
			t.Errorf("ACL %s: row %+v, want %+v", w.Name, r, w)
		}
		want = append(want, r.UUID)
	}
	if len(rows) != len(sh.ACLs) {
		t.Errorf("%d ACLs owned by the subnet, want %d", len(rows), len(sh.ACLs))
	}
	if ls := lsNamed(t, c, "priv"); !sameSet(ls.ACLs, want) {
		t.Errorf("switch lists ACLs %v, want %v", ls.ACLs, want)
	}
	return rows
}

// TestPrivateSubnetCreatedPrivate: a subnet private from the start gets its switch and ACLs in
// one transaction; re-applying sends nothing; deleting it leaves no ACL behind.
func TestPrivateSubnetCreatedPrivate(t *testing.T) {
	c := connect(t)
	base(t, c)
	sh := topology.ForSubnet(privIn(true, "10.17.0.0/16"), &join, nil)
	if len(sh.ACLs) != 4 {
		t.Fatalf("%d ACLs modelled, want 4", len(sh.ACLs))
	}
	got := settled(t, c, sh)
	if n := countOps(got, "insert ACL"); n != 4 {
		t.Errorf("ops %v: %d ACL inserts, want 4", got, n)
	}
	checkSwitchACLs(t, c, sh)
	if n := apply(t, c, sh); n != 0 {
		t.Errorf("re-apply sent %d operations", n)
	}
	owners, err := Owners(context.Background(), c)
	if err != nil || !owners[Owner{topology.OwnerSubnet, "priv"}] {
		t.Fatalf("owners %v, %v", owners, err)
	}
	settled(t, c, topology.Shard{OwnerType: topology.OwnerSubnet, Owner: "priv"})
	if n := len(ownedACLs(t, c, "priv")); n != 0 {
		t.Errorf("%d ACLs of the deleted subnet left", n)
	}
	for _, ls := range list[nb.LogicalSwitch](t, c) {
		if ls.Name == "priv" {
			t.Error("switch left")
		}
	}
}

// TestPrivateSubnetToggled: turning private on adds the ACLs to the existing switch by
// mutation, next to an admin's ACL; changing allowSubnets updates the affected family's drop in
// place; turning private off removes exactly the subnet's ACLs; the admin's stays throughout.
func TestPrivateSubnetToggled(t *testing.T) {
	c := connect(t)
	base(t, c)
	settled(t, c, topology.ForSubnet(privIn(false), &join, nil))
	ls := lsNamed(t, c, "priv")
	admin := &nb.ACL{UUID: "admin", Direction: "to-lport", Priority: 100, Match: "tcp.dst == 23", Action: "drop",
		ExternalIDs: map[string]string{"owner": "admin"}}
	transact(t, c, []model.Model{admin}, func() []ovsdb.Operation {
		return []ovsdb.Operation{refMutation("Logical_Switch", ls.UUID, "acls", ovsdb.MutateOperationInsert, "admin")}
	}, func() bool { return len(lsNamed(t, c, "priv").ACLs) == 1 })
	adminUUID := lsNamed(t, c, "priv").ACLs[0]

	sh := topology.ForSubnet(privIn(true), &join, nil)
	got := settled(t, c, sh)
	if countOps(got, "insert ACL") != 4 || countOps(got, "mutate Logical_Switch") != 4 || len(got) != 8 {
		t.Errorf("private on: %v, want 4 ACL inserts and 4 switch mutations", got)
	}
	before := checkSwitchACLs(t, c, sh, adminUUID)

	sh = topology.ForSubnet(privIn(true, "10.17.0.0/16"), &join, nil)
	if got := settled(t, c, sh); !slices.Equal(got, []string{"update ACL"}) {
		t.Errorf("allowSubnets changed: %v, want the IPv4 drop updated", got)
	}
	after := checkSwitchACLs(t, c, sh, adminUUID)
	if r := after["priv:private/deny/ip4"]; r.UUID != before["priv:private/deny/ip4"].UUID {
		t.Errorf("IPv4 drop replaced, not updated in place: %+v", r)
	}

	sh = topology.ForSubnet(privIn(false, "10.17.0.0/16"), &join, nil)
	got = settled(t, c, sh)
	if countOps(got, "delete ACL") != 4 || countOps(got, "mutate Logical_Switch") != 4 || len(got) != 8 {
		t.Errorf("private off: %v, want 4 ACL deletes and 4 switch mutations", got)
	}
	checkSwitchACLs(t, c, sh, adminUUID)
	if n := apply(t, c, sh); n != 0 {
		t.Errorf("re-apply sent %d operations", n)
	}
}

func countOps(ops []string, op string) int {
	n := 0
	for _, o := range ops {
		if o == op {
			n++
		}
	}
	return n
}
