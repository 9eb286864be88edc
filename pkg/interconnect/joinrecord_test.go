package interconnect

import (
	"context"
	"errors"
	"testing"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// TestAZNameHeld: the cluster that first claims an AZ name holds it. Another cluster claiming,
// renaming to or from it, or forgetting it gets an AZTakenError or changes nothing; a record
// from before holders were kept is claimed; the holder forgets its name, which frees it.
func TestAZNameHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := serveICNB(ctx, t)
	one, two := connect(), connect() // two clusters, each with its own client and cache
	t0 := time.Unix(1000, 0).UTC()
	ids := func() map[string]string {
		t.Helper()
		row, err := ovn.GlobalRow[*icnb.ICNBGlobal](ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		return row.ExternalIDs
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: external_ids %v", what, ids())
			}
		}
	}
	taken := func(err error) bool {
		var e *AZTakenError
		return errors.As(err, &e) && e.AZ == "az1" && e.Owner == "uid-1"
	}

	if _, err := claimJoin(ctx, one, "az1", "uid-1", t0); err != nil {
		t.Fatal(err)
	}
	// The second cluster's cache may not have the record yet: the claim reads it back in its
	// own transaction, so it is refused all the same.
	if _, err := claimJoin(ctx, two, "az1", "uid-2", t0.Add(time.Minute)); !taken(err) {
		t.Fatalf("second cluster claiming az1: %v, want AZ taken by uid-1", err)
	}
	eventually("az1 held by uid-1 with its join time", func() bool {
		i := ids()
		return i[azOwnerKeyPrefix+"az1"] == "uid-1" && i[joinedKeyPrefix+"az1"] == t0.Format(time.RFC3339Nano)
	})
	if _, err := claimJoin(ctx, two, "az2", "uid-2", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	eventually("az2 seen by both", func() bool {
		return heldByOther(ctx, two, "az1", "uid-2") == "uid-1" && heldByOther(ctx, one, "az2", "uid-1") == "uid-2"
	})
	if err := renameJoin(ctx, two, "az2", "az1", "uid-2"); !taken(err) {
		t.Errorf("renaming az2 to the held az1: %v", err)
	}
	if err := renameJoin(ctx, two, "az1", "az3", "uid-2"); !taken(err) {
		t.Errorf("renaming another cluster's az1: %v", err)
	}
	if err := forgetJoin(ctx, two, "az1", "uid-2"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if i := ids(); i[azOwnerKeyPrefix+"az1"] != "uid-1" || i[joinedKeyPrefix+"az1"] == "" {
		t.Fatalf("another cluster forgot az1: %v", i)
	}

	// A record without a holder (written before holders were kept) is claimed by the first.
	if err := updateICNBGlobal(ctx, one, func(m *icnb.ICNBGlobal) ovn.GlobalChange {
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.ExternalIDs, m.ExternalIDs, map[string]string{joinedKeyPrefix + "old": t0.Format(time.RFC3339Nano)}, nil)}
	}); err != nil {
		t.Fatal(err)
	}
	eventually("old recorded", func() bool { _, ok := ids()[joinedKeyPrefix+"old"]; return ok })
	if _, err := claimJoin(ctx, two, "old", "uid-2", t0.Add(time.Hour)); err != nil {
		t.Fatalf("claiming a record without a holder: %v", err)
	}
	eventually("old held by uid-2, its join time kept", func() bool {
		i := ids()
		return i[azOwnerKeyPrefix+"old"] == "uid-2" && i[joinedKeyPrefix+"old"] == t0.Format(time.RFC3339Nano)
	})

	// The holder leaves: the name is free for another cluster.
	if err := forgetJoin(ctx, one, "az1", "uid-1"); err != nil {
		t.Fatal(err)
	}
	eventually("az1 forgotten", func() bool { _, ok := ids()[azOwnerKeyPrefix+"az1"]; return !ok })
	eventually("az1 free for uid-2", func() bool {
		_, err := claimJoin(ctx, two, "az1", "uid-2", t0.Add(2*time.Hour))
		return err == nil
	})
}

// TestRestoreRecord: another AZ's client overwriting this cluster's holder and join time, or
// deleting them, is found and undone: the overwritten keys are put back at once, the deleted
// ones by the claim that follows with the recorded join time; an intact record finds nothing.
func TestRestoreRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := serveICNB(ctx, t)
	mine, attacker := connect(), connect()
	t0 := time.Unix(1000, 0).UTC()
	joined := t0.Format(time.RFC3339Nano)
	if _, err := claimJoin(ctx, mine, "az1", "uid-1", t0); err != nil {
		t.Fatal(err)
	}
	if found, err := restoreRecord(ctx, mine, "az1", "uid-1", joined); err != nil || len(found) != 0 {
		t.Fatalf("intact record: found %v, %v", found, err)
	}
	// The attacker's write reaches this cluster's cache (which triggers the reconcile that
	// looks) before restoreRecord is asked.
	seen := func(ok func(ids map[string]string) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if row, err := ovn.GlobalRow[*icnb.ICNBGlobal](ctx, mine); err == nil && ok(row.ExternalIDs) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("this cluster's cache never saw the attacker's write")
			}
		}
	}
	rewrite := func(want map[string]string, drop []string) {
		t.Helper()
		ids, err := readRecords(ctx, attacker)
		if err != nil {
			t.Fatal(err)
		}
		if err := updateICNBGlobal(ctx, attacker, func(m *icnb.ICNBGlobal) ovn.GlobalChange {
			return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.ExternalIDs, ids, want, drop)}
		}); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(map[string]string{azOwnerKeyPrefix + "az1": "uid-evil", joinedKeyPrefix + "az1": t0.Add(time.Hour).Format(time.RFC3339Nano)}, nil)
	seen(func(ids map[string]string) bool { return ids[azOwnerKeyPrefix+"az1"] == "uid-evil" })
	found, err := restoreRecord(ctx, mine, "az1", "uid-1", joined)
	if err != nil || len(found) != 2 {
		t.Fatalf("rewritten record: found %v, %v; want the holder and the join time", found, err)
	}
	t.Logf("found: %v", found)
	ids, _ := readRecords(ctx, mine)
	if ids[azOwnerKeyPrefix+"az1"] != "uid-1" || ids[joinedKeyPrefix+"az1"] != joined {
		t.Fatalf("after the repair: %v", ids)
	}
	rewrite(nil, []string{azOwnerKeyPrefix + "az1", joinedKeyPrefix + "az1"})
	seen(func(ids map[string]string) bool { _, ok := ids[azOwnerKeyPrefix+"az1"]; return !ok })
	if found, err := restoreRecord(ctx, mine, "az1", "uid-1", joined); err != nil || len(found) != 2 {
		t.Fatalf("deleted record: found %v, %v", found, err)
	}
	got, err := claimJoin(ctx, mine, "az1", "uid-1", t0)
	if err != nil || !got["az1"].Equal(t0) {
		t.Fatalf("claim after the deletion: %v, %v; want az1 joined at %s again", got, err, t0)
	}
}

// serveICNB serves an in-memory IC-NB and returns a function connecting a new client (one per
// cluster, each with its own cache) to it.
// serveICSB serves an empty IC-SB in memory and connects one client to it.
func serveICSB(ctx context.Context, t *testing.T) libovsdb.Client {
	db, err := icsb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ovn.ConnectICSB(ctx, ovn.Config{Endpoints: []string{ovntest.Serve(t, ovntest.SocketPath(t), db)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func serveICNB(ctx context.Context, t *testing.T) func() libovsdb.Client {
	db, err := icnb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	ep := ovntest.Serve(t, ovntest.SocketPath(t), db)
	return func() libovsdb.Client {
		c, err := ovn.ConnectICNB(ctx, ovn.Config{Endpoints: []string{ep}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}
