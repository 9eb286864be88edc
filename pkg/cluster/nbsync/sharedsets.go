package nbsync

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Shared address sets (topology.AddressSet.Shared): the peers of many NetworkPolicies select
// the same pods ("every pod of namespace x"), and one set per selector serves them all, so a
// pod coming or going changes one row, not one per policy.
//
// Such a set belongs to no shard: its owner is topology.OwnerPolicyPeer and its own name.
// Every shard using it is recorded in its external_ids under userPrefix (the reference count).
// A shard adds its key when it starts using the set, creating the set if it is the first, and
// removes it when it stops; the last user deletes the set. Users compute the same addresses
// from the same cache, and each sends only the difference it sees, so the second user of an
// up-to-date set sends nothing.

// userPrefix starts the external_ids key that records a shard using a shared set; the rest is
// "<owner type>:<owner>".
const userPrefix = "kovn.io/user:"

func userKey(sh topology.Shard) string { return userPrefix + sh.OwnerType + ":" + sh.Owner }

// usersOf returns the owners recorded as using a shared set.
func usersOf(ids map[string]string) []Owner {
	var out []Owner
	for k := range ids {
		if rest, ok := strings.CutPrefix(k, userPrefix); ok {
			if typ, key, ok := strings.Cut(rest, ":"); ok {
				out = append(out, Owner{Type: typ, Key: key})
			}
		}
	}
	return out
}

func (t *tx) syncSharedAddressSets(want map[string]topology.AddressSet) {
	user := userKey(t.sh)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		as := want[name]
		addrs := slices.Clone(as.Addresses)
		if addrs == nil {
			addrs = []string{}
		}
		cur := byName(t, &nb.AddressSet{Name: name})
		if cur == nil {
			ids := ovn.OwnerIDs(topology.OwnerPolicyPeer, name, as.ExternalIDs)
			ids[ovn.WriterKey] = Writer
			ids[user] = "true"
			m := nb.AddressSet{Name: name, Addresses: addrs, ExternalIDs: ids}
			t.create(&m, func(id string) { m.UUID = id })
			continue
		}
		if !Owned(cur.ExternalIDs, topology.OwnerPolicyPeer, name) {
			t.add(nil, errors.New("address set "+name+" exists and is not a kovn shared peer set"))
			continue
		}
		m := nb.AddressSet{UUID: cur.UUID, Name: name, Addresses: addrs}
		t.mutateAddresses(&m, cur.Addresses)
		if muts := ovn.MapMutations(&m.ExternalIDs, cur.ExternalIDs, map[string]string{user: "true"}, nil); len(muts) > 0 {
			t.mutate(&m, muts...)
		}
	}
	for _, cur := range t.sharedSetsUsed(user) {
		if _, ok := want[cur.Name]; ok {
			continue
		}
		if len(usersOf(cur.ExternalIDs)) > 1 {
			m := nb.AddressSet{UUID: cur.UUID}
			t.mutate(&m, ovn.MapMutations(&m.ExternalIDs, cur.ExternalIDs, nil, []string{user})...)
			continue
		}
		// The last user: delete, unless another user joined since the cache was read (the
		// transaction then fails and the reconcile is retried).
		zero := 0
		ops, err := t.c.Where(cur).Wait(ovsdb.WaitConditionEqual, &zero, cur, &cur.ExternalIDs)
		t.add(ops, err)
		t.delete(cur)
	}
}

// sharedSetsUsed lists the shared sets recording user. It scans the cached Address_Set table:
// it holds kovn's peer sets, one per selector and family, a small table.
func (t *tx) sharedSetsUsed(user string) []*nb.AddressSet {
	var rows []*nb.AddressSet
	err := t.c.WhereCache(func(as *nb.AddressSet) bool {
		_, ok := as.ExternalIDs[user]
		return ok && as.ExternalIDs[ovn.OwnerTypeKey] == topology.OwnerPolicyPeer
	}).List(t.ctx, &rows)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		t.add(nil, err)
	}
	slices.SortFunc(rows, func(a, b *nb.AddressSet) int { return strings.Compare(a.Name, b.Name) })
	return rows
}
