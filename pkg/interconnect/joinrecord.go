package interconnect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
)

// joinedKeyPrefix starts the IC_NB_Global external_ids key under which each AZ records when it
// joined the set ("kovn.io/joined/<az>" = RFC 3339 time): conflicts go to the older AZ.
const joinedKeyPrefix = "kovn.io/joined/"

// azOwnerKeyPrefix starts the IC_NB_Global external_ids key naming the cluster that holds an
// AZ name ("kovn.io/az-owner/<az>" = the UID of its kube-system namespace). ovn-ic keys an AZ by
// name alone: a second cluster configured with the same name would share the AZ's row, and its
// kovn would remove that AZ when it left or renamed. A cluster writes and deletes only the
// records, AZ rows and join records of names it holds.
const azOwnerKeyPrefix = "kovn.io/az-owner/"

// AZTakenError says that an AZ name is held by another cluster of the clusterset.
type AZTakenError struct {
	AZ, Owner string
}

func (e *AZTakenError) Error() string {
	return fmt.Sprintf("AZ name %q is held by another cluster of the clusterset (kube-system namespace UID %s): "+
		"choose another azName; nothing of that AZ was changed", e.AZ, e.Owner)
}

// claimJoin records when az joined and that owner holds it, each only when absent (an insert
// mutation keeps an existing key), creating IC_NB_Global if no tool has yet, and reads the
// record back in the same transaction: of two clusters claiming one name at once, exactly one
// holds it. It returns every AZ's join time, or an *AZTakenError when another cluster holds az.
// A record from before owners were kept is claimed by the first cluster that joins under it.
func claimJoin(ctx context.Context, c libovsdb.Client, az, owner string, now time.Time) (map[string]time.Time, error) {
	want := map[string]string{joinedKeyPrefix + az: now.UTC().Format(time.RFC3339Nano), azOwnerKeyPrefix + az: owner}
	var ops []ovsdb.Operation
	var where []ovsdb.Condition
	row, err := ovn.GlobalRow[*icnb.ICNBGlobal](ctx, c)
	switch {
	case errors.Is(err, ovn.ErrNoGlobalRow):
		if ops, err = c.Create(&icnb.ICNBGlobal{ExternalIDs: want}); err != nil {
			return nil, err
		}
		where = []ovsdb.Condition{} // the one row, just created
	case err != nil:
		return nil, err
	default:
		missing := map[string]string{}
		for k, v := range want {
			if _, ok := row.ExternalIDs[k]; !ok {
				missing[k] = v
			}
		}
		if len(missing) > 0 {
			if ops, err = ovn.MutateOps(c, nil, row, model.Mutation{Field: &row.ExternalIDs, Mutator: ovsdb.MutateOperationInsert, Value: missing}); err != nil {
				return nil, err
			}
		}
		where = []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: row.UUID})}
	}
	ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: icnb.ICNBGlobalTable, Where: where, Columns: []string{"external_ids"}})
	res, err := ovn.Transact(ctx, c, ops)
	if err != nil {
		return nil, err
	}
	ids, err := externalIDsOf(res[len(res)-1])
	if err != nil {
		return nil, fmt.Errorf("reading IC_NB_Global back: %w", err)
	}
	if holder := ids[azOwnerKeyPrefix+az]; holder != owner {
		return nil, &AZTakenError{AZ: az, Owner: holder}
	}
	out := map[string]time.Time{}
	for k, v := range ids {
		if name, ok := strings.CutPrefix(k, joinedKeyPrefix); ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				out[name] = t
			}
		}
	}
	return out, nil
}

// externalIDsOf is the external_ids column of the one row a select returned.
func externalIDsOf(res ovsdb.OperationResult) (map[string]string, error) {
	if len(res.Rows) != 1 {
		return nil, fmt.Errorf("%d rows", len(res.Rows))
	}
	v := res.Rows[0]["external_ids"]
	if v == nil { // an empty map
		return map[string]string{}, nil
	}
	m, ok := v.(ovsdb.OvsMap)
	if !ok {
		return nil, fmt.Errorf("external_ids is %T", res.Rows[0]["external_ids"])
	}
	out := make(map[string]string, len(m.GoMap))
	for k, v := range m.GoMap {
		ks, kok := k.(string)
		vs, vok := v.(string)
		if kok && vok {
			out[ks] = vs
		}
	}
	return out, nil
}

// heldByOther is the cluster other than owner that holds az according to the cache, "" when
// owner holds it or no cluster recorded holding it (owner may act for az).
func heldByOther(ctx context.Context, c libovsdb.Client, az, owner string) string {
	row, err := ovn.GlobalRow[*icnb.ICNBGlobal](ctx, c)
	if err != nil {
		return ""
	}
	if h := row.ExternalIDs[azOwnerKeyPrefix+az]; h != owner {
		return h
	}
	return ""
}

// renameJoin moves AZ from's join record and hold to to (unless to has a join record), so a
// renamed AZ keeps its place in conflict precedence, and drops from's withdrawal declaration
// (the reconcile declares again under the new name). Nothing happens when from has no record;
// an *AZTakenError, and no change, when another cluster holds to or from.
func renameJoin(ctx context.Context, c libovsdb.Client, from, to, owner string) error {
	for _, az := range []string{to, from} {
		if h := heldByOther(ctx, c, az, owner); h != "" {
			return &AZTakenError{AZ: az, Owner: h}
		}
	}
	return updateICNBGlobal(ctx, c, func(m *icnb.ICNBGlobal) ovn.GlobalChange {
		ids := m.ExternalIDs
		joined, ok := ids[joinedKeyPrefix+from]
		if !ok {
			return ovn.GlobalChange{}
		}
		want := map[string]string{azOwnerKeyPrefix + to: owner}
		if ids[joinedKeyPrefix+to] == "" {
			want[joinedKeyPrefix+to] = joined
		}
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.ExternalIDs, ids, want,
			[]string{joinedKeyPrefix + from, withdrawnKeyPrefix + from, subnetsKeyPrefix + from, azOwnerKeyPrefix + from})}
	})
}

// forgetJoin removes az's join record, declarations and hold (it left the set), unless
// another cluster holds az: then nothing.
func forgetJoin(ctx context.Context, c libovsdb.Client, az, owner string) error {
	if heldByOther(ctx, c, az, owner) != "" {
		return nil
	}
	return updateICNBGlobal(ctx, c, func(m *icnb.ICNBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.ExternalIDs, m.ExternalIDs, nil,
			[]string{joinedKeyPrefix + az, withdrawnKeyPrefix + az, subnetsKeyPrefix + az, azOwnerKeyPrefix + az})}
	})
}

// readRecords reads IC_NB_Global's external_ids from the server, not the cache, which may
// lag (after a reconnect, after another client's write): a watchdog must judge what is there.
func readRecords(ctx context.Context, c libovsdb.Client) (map[string]string, error) {
	res, err := ovn.Transact(ctx, c, []ovsdb.Operation{{Op: ovsdb.OperationSelect, Table: icnb.ICNBGlobalTable,
		Where: []ovsdb.Condition{}, Columns: []string{"external_ids"}}})
	if err != nil {
		return nil, err
	}
	if len(res) == 0 || len(res[0].Rows) == 0 {
		return map[string]string{}, nil
	}
	return externalIDsOf(res[0])
}

// restoreRecord puts back this cluster's join record of az (held as owner since joined, an
// RFC 3339 time) where someone else changed it, and says what it found: a holder or join time
// changed (overwritten here) or deleted (claimJoin inserts it again with joined). OVN-IC's
// databases have no access control, so any AZ's certificate could have written it; a cluster
// of kovn never does (claims only insert). The cache answers when the record is intact there;
// only a difference is read again from the server (a cache that lags after a reconnect must
// not be taken for tampering). A change the cache has not seen yet is found on the pass its
// arrival triggers.
func restoreRecord(ctx context.Context, c libovsdb.Client, az, owner, joined string) ([]string, error) {
	if row, err := ovn.GlobalRow[*icnb.ICNBGlobal](ctx, c); err == nil &&
		row.ExternalIDs[azOwnerKeyPrefix+az] == owner && row.ExternalIDs[joinedKeyPrefix+az] == joined {
		return nil, nil
	}
	ids, err := readRecords(ctx, c)
	if err != nil {
		return nil, err
	}
	var found []string
	want := map[string]string{}
	for _, k := range []struct{ key, mine, what string }{
		{azOwnerKeyPrefix + az, owner, "holder"}, {joinedKeyPrefix + az, joined, "join time"},
	} {
		switch v, ok := ids[k.key]; {
		case !ok:
			found = append(found, fmt.Sprintf("the %s of AZ %s was deleted", k.what, az))
		case v != k.mine:
			found = append(found, fmt.Sprintf("the %s of AZ %s was changed to %q", k.what, az, v))
			want[k.key] = k.mine
		}
	}
	if len(want) == 0 || len(ids) == 0 {
		return found, nil
	}
	return found, updateICNBGlobal(ctx, c, func(m *icnb.ICNBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.ExternalIDs, ids, want, nil)}
	})
}
