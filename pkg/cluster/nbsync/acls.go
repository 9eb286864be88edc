package nbsync

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// ACLs, address sets and the port groups that own them (NetworkPolicy shards), and the ACLs of
// private subnets' switches.
//
// An Owned port group is its shard's alone: its ports and acls columns are written whole, so
// a pod the policy no longer selects leaves it, and an ACL the shard no longer wants is
// dropped from it. ACL is not a root table: a group's acls column references its rows
// strongly, and the server deletes an ACL no group references. nbsync deletes them
// explicitly all the same, in the transaction that drops the reference.
//
// ACLs are keyed on their group and name, unique within a shard, so a rule whose match
// changes (a port added) updates its row in place and the group's acls column stays as it is.
// Address sets are owned whole; their addresses change by mutation of the difference, so a
// pod joining a set of thousands sends one address, not the whole list.
//
// A switch's ACLs (a private subnet's) are different: Logical_Switch.acls is shared, so they
// join and leave it by mutation, and their rows say so in parentTableKey. A switch deleted in
// the same transaction takes its references with it; the mutation then matches no row.

// parentTableKey is set, to "Logical_Switch", on ACLs that hang off a switch; ACLs without it
// hang off a port group.
const parentTableKey = "kovn.io/parent-table"

func aclKey(switchACL bool, parent, name string) string {
	if switchACL {
		return "Logical_Switch|" + parent + "|" + name
	}
	return "Port_Group|" + parent + "|" + name
}

func wantKey(a topology.ACL) string {
	if a.Switch != "" {
		return aclKey(true, a.Switch, a.Name)
	}
	return aclKey(false, a.PortGroup, a.Name)
}

func (t *tx) syncACLs() {
	want := map[string]topology.ACL{}
	for _, a := range t.sh.ACLs {
		want[wantKey(a)] = a
	}
	uuids := map[string][]string{} // per group, the ACLs its acls column holds
	done := map[string]bool{}
	for _, cur := range findOwned(t, &nb.ACL{ExternalIDs: ownerProbe(t.sh)}) {
		onSwitch := cur.ExternalIDs[parentTableKey] == "Logical_Switch"
		k := aclKey(onSwitch, cur.ExternalIDs[ovn.ParentKey], ptr.Deref(cur.Name, ""))
		a, ok := want[k]
		if !ok || done[k] {
			if onSwitch {
				// A switch this transaction inserts cannot list the row: nothing to detach.
				if ls, isNew := t.lswitch(cur.ExternalIDs[ovn.ParentKey]); !isNew {
					detach(t, ls, switchACLs, cur.UUID)
				}
			}
			t.delete(cur)
			continue
		}
		done[k] = true
		m := t.aclModel(a)
		m.UUID = cur.UUID
		if !sameACL(cur, m) {
			t.update(m, &m.Name, &m.Direction, &m.Priority, &m.Match, &m.Action, &m.Options, &m.ExternalIDs,
				&m.Log, &m.Severity, &m.Meter)
		}
		if a.Switch == "" {
			uuids[a.PortGroup] = append(uuids[a.PortGroup], cur.UUID)
		}
	}
	t.createACLs(done, uuids)
	for _, pg := range t.sh.PortGroups {
		switch {
		case pg.Owned:
			t.writeOwnedGroup(pg, uuids[pg.Name])
		case pg.OwnsACLs:
			t.writeGroupACLs(pg, uuids[pg.Name])
		}
	}
}

// createACLs inserts the shard's ACLs not in done: a group's into uuids (its acls column is
// written whole afterwards), a switch's by mutation of the switch (or in its insert).
func (t *tx) createACLs(done map[string]bool, uuids map[string][]string) {
	owned := map[string]bool{}
	for _, pg := range t.sh.PortGroups {
		owned[pg.Name] = pg.Owned || pg.OwnsACLs
	}
	for _, a := range t.sh.ACLs {
		if done[wantKey(a)] {
			continue
		}
		if a.Switch != "" {
			ls, isNew := t.lswitch(a.Switch)
			if ls == nil {
				t.missing = append(t.missing, "switch "+a.Switch)
				continue
			}
			m := t.aclModel(a)
			attach(t, "switch "+a.Switch, ls, isNew, switchACLs, t.create(m, func(id string) { m.UUID = id }))
			continue
		}
		if !owned[a.PortGroup] {
			t.add(nil, fmt.Errorf("ACL %q names port group %q, which its shard does not own", a.Name, a.PortGroup))
			continue
		}
		m := t.aclModel(a)
		uuids[a.PortGroup] = append(uuids[a.PortGroup], t.create(m, func(id string) { m.UUID = id }))
	}
}

func (t *tx) aclModel(a topology.ACL) *nb.ACL {
	parent, extra := a.PortGroup, a.ExternalIDs
	if a.Switch != "" {
		parent, extra = a.Switch, maps.Clone(a.ExternalIDs)
		if extra == nil {
			extra = map[string]string{}
		}
		extra[parentTableKey] = "Logical_Switch"
	}
	m := &nb.ACL{Direction: a.Direction, Priority: a.Priority, Match: a.Match, Action: a.Action, Options: maps.Clone(a.Options),
		ExternalIDs: t.ids(extra, parent)}
	if a.Name != "" {
		name := a.Name
		m.Name = &name
	}
	if a.LogSeverity != "" {
		meter := a.Meter
		if meter == "" {
			meter = topology.ACLLogMeter
		}
		m.Log, m.Severity, m.Meter = true, ptr.To(a.LogSeverity), ptr.To(meter)
	}
	return m
}

func sameACL(cur, want *nb.ACL) bool {
	return ptr.Deref(cur.Name, "") == ptr.Deref(want.Name, "") && cur.Direction == want.Direction && cur.Priority == want.Priority &&
		cur.Match == want.Match && cur.Action == want.Action && sameMap(cur.Options, want.Options) &&
		sameMap(cur.ExternalIDs, want.ExternalIDs) && cur.Log == want.Log &&
		ptr.Deref(cur.Severity, "") == ptr.Deref(want.Severity, "") && ptr.Deref(cur.Meter, "") == ptr.Deref(want.Meter, "")
}

// writeOwnedGroup writes the ports and acls columns of an Owned group whole: into the insert
// when this transaction creates the group (syncPortGroups), else by one update of the columns
// that differ.
func (t *tx) writeOwnedGroup(pg topology.PortGroup, acls []string) {
	ports := t.portUUIDs(pg.Ports)
	if m, ok := t.newParent["Port_Group/"+pg.Name]; ok {
		g := m.(*nb.PortGroup)
		g.Ports, g.ACLs = ports, acls
		return
	}
	cur := byName(t, &nb.PortGroup{Name: pg.Name})
	if cur == nil {
		return
	}
	m := &nb.PortGroup{UUID: cur.UUID, Ports: ports, ACLs: acls}
	var fields []any
	if !sameSet(cur.Ports, ports) {
		fields = append(fields, &m.Ports)
	}
	if !sameSet(cur.ACLs, acls) {
		fields = append(fields, &m.ACLs)
	}
	if len(fields) > 0 {
		t.update(m, fields...)
	}
}

// writeGroupACLs writes the acls column of a group whose ports are not the shard's (OwnsACLs).
func (t *tx) writeGroupACLs(pg topology.PortGroup, acls []string) {
	if m, ok := t.newParent["Port_Group/"+pg.Name]; ok {
		m.(*nb.PortGroup).ACLs = acls
		return
	}
	cur := byName(t, &nb.PortGroup{Name: pg.Name})
	if cur == nil || sameSet(cur.ACLs, acls) {
		return
	}
	m := &nb.PortGroup{UUID: cur.UUID, ACLs: acls}
	t.update(m, &m.ACLs)
}

// portUUIDs resolves switch port names through the name index. A port that does not exist
// yet (its pod's shard has not been applied) is left out and reported missing, so the caller
// applies again once it exists.
func (t *tx) portUUIDs(names []string) []string {
	out := []string{}
	for _, name := range names {
		if id := t.uuidByName("Logical_Switch_Port", name); id != "" {
			out = append(out, id)
		} else {
			t.missing = append(t.missing, "switch port "+name)
		}
	}
	return out
}

func (t *tx) syncAddressSets() {
	want := map[string]bool{}
	shared := map[string]topology.AddressSet{}
	for _, as := range t.sh.AddressSets {
		if as.Shared {
			shared[as.Name] = as
			continue
		}
		want[as.Name] = true
		m := nb.AddressSet{Name: as.Name, Addresses: slices.Clone(as.Addresses), ExternalIDs: t.ids(as.ExternalIDs, "")}
		if m.Addresses == nil {
			m.Addresses = []string{}
		}
		// Names are unique in the schema: a set of that name is this shard's (adopted if an
		// earlier writer left it).
		cur := byName(t, &nb.AddressSet{Name: as.Name})
		if cur == nil {
			t.create(&m, func(id string) { m.UUID = id })
			continue
		}
		m.UUID = cur.UUID
		t.mutateAddresses(&m, cur.Addresses)
		if !sameMap(cur.ExternalIDs, m.ExternalIDs) {
			t.update(&m, &m.ExternalIDs)
		}
	}
	for _, cur := range findOwned(t, &nb.AddressSet{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[cur.Name] {
			t.delete(cur)
		}
	}
	t.syncSharedAddressSets(shared)
}

// mutateAddresses sends the difference between have and m's addresses.
func (t *tx) mutateAddresses(m *nb.AddressSet, have []string) {
	var del, ins []string
	for _, a := range have {
		if !slices.Contains(m.Addresses, a) {
			del = append(del, a)
		}
	}
	for _, a := range m.Addresses {
		if !slices.Contains(have, a) {
			ins = append(ins, a)
		}
	}
	var muts []model.Mutation
	if len(del) > 0 {
		muts = append(muts, model.Mutation{Field: &m.Addresses, Mutator: ovsdb.MutateOperationDelete, Value: del})
	}
	if len(ins) > 0 {
		muts = append(muts, model.Mutation{Field: &m.Addresses, Mutator: ovsdb.MutateOperationInsert, Value: ins})
	}
	if len(muts) > 0 {
		t.mutate(m, muts...)
	}
}

// ProgrammedACLLogging is the logging the policy's ACLs in c's cache carry now (its deny
// ACLs' severity, its rule ACLs'), the state a refused namespace annotation leaves in force.
func ProgrammedACLLogging(ctx context.Context, c client.Client, namespace, name string) (topology.ACLLogging, error) {
	owner := namespace + "/" + name
	rows, err := ownedRows(ctx, c, &nb.ACL{ExternalIDs: map[string]string{ovn.OwnerKey: owner}}, topology.OwnerNetworkPolicy, owner)
	if err != nil {
		return topology.ACLLogging{}, err
	}
	var out topology.ACLLogging
	for _, r := range rows {
		if !r.Log {
			continue
		}
		sev := ptr.Deref(r.Severity, "")
		switch _, rule, _ := strings.Cut(r.ExternalIDs[topology.PolicyRuleKey], "/"); rule {
		case "deny":
			out.Deny = sev
		case "neighbours", "nodes":
		default:
			out.Allow = sev
		}
	}
	return out, nil
}
