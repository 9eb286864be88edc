package cni

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// ovsDB is an in-memory Open_vSwitch database with a node's bootstrap done (the root row
// and br-int), served on a unix socket like the node's ovsdb-server.
type ovsDB struct {
	endpoint string
	client   client.Client // the daemon's connection
}

func newOVSDB(t *testing.T) *ovsDB {
	t.Helper()
	c, endpoint := ovntest.ServeOVS(t, DefaultBridge, nil)
	return &ovsDB{endpoint: endpoint, client: c}
}

// connect opens another client (closed at the end of the test).
func (db *ovsDB) connect(t *testing.T) client.Client { return ovntest.ConnectOVS(t, db.endpoint) }

func (db *ovsDB) bridge(t *testing.T) *vswitch.Bridge {
	t.Helper()
	br, err := ovn.Get(context.Background(), db.client, &vswitch.Bridge{Name: DefaultBridge})
	if errors.Is(err, ovn.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return br
}

func (db *ovsDB) ports(t *testing.T) []*vswitch.Port {
	t.Helper()
	ports, err := ovn.Find(context.Background(), db.client, func(*vswitch.Port) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

func (db *ovsDB) ifaces(t *testing.T) []*vswitch.Interface {
	t.Helper()
	ifaces, err := ovn.Find(context.Background(), db.client, func(*vswitch.Interface) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	return ifaces
}

// fakeOVNController plays ovn-controller on its own connection: it sets
// external_ids:ovn-installed=true on every interface whose iface-id install accepts.
func (db *ovsDB) fakeOVNController(t *testing.T, install func(ifaceID string) bool) {
	t.Helper()
	c := db.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			ifaces, _ := ovn.Find(ctx, c, func(i *vswitch.Interface) bool {
				id := i.ExternalIDs[ExtIDIfaceID]
				return id != "" && i.ExternalIDs[ExtIDOVNInstalled] != "true" && install(id)
			})
			for _, i := range ifaces {
				i.ExternalIDs = maps.Clone(i.ExternalIDs)
				i.ExternalIDs[ExtIDOVNInstalled] = "true"
				if ops, err := c.Where(i).Update(i, &i.ExternalIDs); err == nil {
					_, _ = c.Transact(ctx, ops...)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// fakeVswitchd plays ovs-vswitchd on its own connection: it acknowledges every
// configuration change by copying Open_vSwitch next_cfg to cur_cfg.
func (db *ovsDB) fakeVswitchd(t *testing.T) {
	t.Helper()
	c := db.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			roots, _ := ovn.Find(ctx, c, func(r *vswitch.OpenvSwitch) bool { return r.CurCfg != r.NextCfg })
			for _, r := range roots {
				r.CurCfg = r.NextCfg
				if ops, err := c.Where(r).Update(r, &r.CurCfg); err == nil {
					_, _ = c.Transact(ctx, ops...)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

func (db *ovsDB) root(t *testing.T) *vswitch.OpenvSwitch {
	t.Helper()
	roots, err := ovn.Find(context.Background(), db.client, func(*vswitch.OpenvSwitch) bool { return true })
	if err != nil || len(roots) != 1 {
		t.Fatalf("Open_vSwitch rows: %v, %v", roots, err)
	}
	return roots[0]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkAttached asserts that exactly one port and one interface named hostIf exist, that
// the port is on br-int and the interface carries the ids.
func checkAttached(t *testing.T, db *ovsDB, hostIf string, wantIDs map[string]string) (portUUID, ifaceUUID string) {
	t.Helper()
	ports, ifaces := db.ports(t), db.ifaces(t)
	if len(ports) != 1 || len(ifaces) != 1 {
		t.Fatalf("got %d ports and %d interfaces, want 1 of each", len(ports), len(ifaces))
	}
	p, i := ports[0], ifaces[0]
	if p.Name != hostIf || i.Name != hostIf || len(p.Interfaces) != 1 || p.Interfaces[0] != i.UUID {
		t.Errorf("port %+v / interface %s %s do not match %s", p, i.Name, i.UUID, hostIf)
	}
	if br := db.bridge(t); len(br.Ports) != 1 || br.Ports[0] != p.UUID {
		t.Errorf("br-int ports = %v, want [%s]", br.Ports, p.UUID)
	}
	for k, v := range wantIDs {
		if i.ExternalIDs[k] != v {
			t.Errorf("external_ids[%s] = %q, want %q (all: %v)", k, i.ExternalIDs[k], v, i.ExternalIDs)
		}
	}
	return p.UUID, i.UUID
}

func TestOVSAttachIdempotent(t *testing.T) {
	db := newOVSDB(t)
	a := NewOVSAttacher(db.client, "")
	ctx := context.Background()
	ids := map[string]string{ExtIDPodNamespace: "default", ExtIDPodName: "web-0", ExtIDContainerID: "c1", ExtIDPodUID: ""}
	if err := a.Attach(ctx, "c1_h", "web-0.default", ids); err != nil {
		t.Fatalf("Attach: %v", err)
	}
	want := map[string]string{ExtIDIfaceID: "web-0.default", ExtIDPodNamespace: "default", ExtIDPodName: "web-0", ExtIDContainerID: "c1"}
	port1, iface1 := checkAttached(t, db, "c1_h", want)
	if _, ok := db.ifaces(t)[0].ExternalIDs[ExtIDPodUID]; ok {
		t.Error("an empty external id value was written")
	}

	// ovn-controller marks it installed; a repeated Attach keeps that and the rows.
	db.fakeOVNController(t, func(string) bool { return true })
	if err := a.WaitInstalled(ctx, "c1_h"); err != nil {
		t.Fatalf("WaitInstalled: %v", err)
	}
	if err := a.Attach(ctx, "c1_h", "web-0.default", ids); err != nil {
		t.Fatalf("second Attach: %v", err)
	}
	want[ExtIDOVNInstalled] = "true"
	port2, iface2 := checkAttached(t, db, "c1_h", want)
	if port1 != port2 || iface1 != iface2 {
		t.Errorf("second Attach replaced rows: port %s -> %s, interface %s -> %s", port1, port2, iface1, iface2)
	}
	if err := a.Verify(ctx, "c1_h", "web-0.default"); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := a.Verify(ctx, "c1_h", "other.default"); err == nil || !strings.Contains(err.Error(), "iface-id") {
		t.Errorf("Verify with another iface-id = %v, want an iface-id mismatch", err)
	}
}

func TestOVSAttachNewIfaceIDDropsStaleState(t *testing.T) {
	db := newOVSDB(t)
	a := NewOVSAttacher(db.client, "")
	ctx := context.Background()
	db.fakeOVNController(t, func(id string) bool { return id == "old.default" })
	if err := a.Attach(ctx, "c1_h", "old.default", map[string]string{ExtIDPodName: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitInstalled(ctx, "c1_h"); err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(ctx, "c1_h", "new.default", map[string]string{ExtIDPodName: "new"}); err != nil {
		t.Fatal(err)
	}
	checkAttached(t, db, "c1_h", map[string]string{ExtIDIfaceID: "new.default", ExtIDPodName: "new"})
	if v, ok := db.ifaces(t)[0].ExternalIDs[ExtIDOVNInstalled]; ok {
		t.Errorf("ovn-installed=%q of the old iface-id survived a re-attach under a new one", v)
	}
}

func TestOVSAttachErrors(t *testing.T) {
	db := newOVSDB(t)
	ctx := context.Background()
	err := NewOVSAttacher(db.client, "br-missing").Attach(ctx, "c1_h", "p", nil)
	if !errors.Is(err, ErrTryAgain) || !strings.Contains(err.Error(), "br-missing does not exist") {
		t.Errorf("Attach to a missing bridge = %v, want ErrTryAgain naming the bridge", err)
	}
	if err := NewOVSAttacher(db.client, "").Attach(ctx, "c1_h", "", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Attach without iface-id = %v, want ErrInvalidConfig", err)
	}
	if n := len(db.ports(t)) + len(db.ifaces(t)); n != 0 {
		t.Errorf("failed Attach left %d rows", n)
	}
}

func TestOVSWaitInstalled(t *testing.T) {
	db := newOVSDB(t)
	a := NewOVSAttacher(db.client, "")
	a.InstallTimeout = 300 * time.Millisecond
	ctx := context.Background()
	if err := a.Attach(ctx, "c1_h", "web-0.default", nil); err != nil {
		t.Fatal(err)
	}

	// Nobody sets ovn-installed: a clear timeout.
	start := time.Now()
	err := a.WaitInstalled(ctx, "c1_h")
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("WaitInstalled took %s, want about its 300ms timeout", took)
	}
	if !errors.Is(err, ErrTryAgain) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), `port "web-0.default"`) || !strings.Contains(err.Error(), "ovn-controller") ||
		!strings.Contains(err.Error(), "OpenFlow port") {
		t.Errorf("WaitInstalled timeout error = %v", err)
	}
	if err := a.Verify(ctx, "c1_h", "web-0.default"); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("Verify before installation = %v, want 'not installed'", err)
	}
	if err := a.WaitInstalled(ctx, "missing_h"); err == nil || !strings.Contains(err.Error(), "not in the Open_vSwitch database") {
		t.Errorf("WaitInstalled of a missing interface = %v", err)
	}

	// ovn-controller installs it a little later: WaitInstalled returns right then.
	a.InstallTimeout = 10 * time.Second
	go func() {
		time.Sleep(200 * time.Millisecond)
		db.fakeOVNController(t, func(string) bool { return true })
	}()
	start = time.Now()
	if err := a.WaitInstalled(ctx, "c1_h"); err != nil {
		t.Fatalf("WaitInstalled: %v", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 5*time.Second {
		t.Errorf("WaitInstalled returned after %s, want shortly after the 200ms installation", took)
	}

	// The caller's context bounds it too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.WaitInstalled(cctx, "missing_h"); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitInstalled with a canceled context = %v", err)
	}
}

func TestOVSDetach(t *testing.T) {
	db := newOVSDB(t)
	db.fakeVswitchd(t)
	a := NewOVSAttacher(db.client, "")
	ctx := context.Background()
	for _, name := range []string{"c1_h", "c2_h"} {
		if err := a.Attach(ctx, name, "pod-"+name, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := a.Detach(ctx, "c1_h"); err != nil {
			t.Fatalf("Detach #%d: %v", i+1, err)
		}
	}
	if err := a.Detach(ctx, "never-attached"); err != nil {
		t.Errorf("Detach of an unknown port: %v", err)
	}
	checkAttached(t, db, "c2_h", map[string]string{ExtIDIfaceID: "pod-c2_h"})
	if err := a.Detach(ctx, "c2_h"); err != nil {
		t.Fatal(err)
	}
	if br, ports, ifaces := db.bridge(t), db.ports(t), db.ifaces(t); len(br.Ports)+len(ports)+len(ifaces) != 0 {
		t.Errorf("after detaching everything: br-int ports %v, %d ports, %d interfaces", br.Ports, len(ports), len(ifaces))
	}
}

func TestOVSAttachMovesPortFromOtherBridge(t *testing.T) {
	db := newOVSDB(t)
	ctx := context.Background()
	ex := &vswitch.Bridge{UUID: ovn.NewNamedUUID(), Name: "br-ex"}
	ops, err := db.client.Create(ex)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ovn.Find(ctx, db.client, func(*vswitch.OpenvSwitch) bool { return true })
	if err != nil || len(root) != 1 {
		t.Fatalf("Open_vSwitch root rows: %v, %v", root, err)
	}
	ops, err = ovn.MutateOps(db.client, ops, root[0], model.Mutation{Field: &root[0].Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{ex.UUID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(ctx, db.client, ops); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "br-ex in the cache", func() bool {
		_, err := ovn.Get(ctx, db.client, &vswitch.Bridge{Name: "br-ex"})
		return err == nil
	})
	if err := NewOVSAttacher(db.client, "br-ex").Attach(ctx, "c1_h", "p1", nil); err != nil {
		t.Fatal(err)
	}
	if err := NewOVSAttacher(db.client, "").Attach(ctx, "c1_h", "p1", nil); err != nil {
		t.Fatal(err)
	}
	checkAttached(t, db, "c1_h", map[string]string{ExtIDIfaceID: "p1"})
	waitFor(t, "br-ex to lose the port", func() bool {
		br, err := ovn.Get(ctx, db.client, &vswitch.Bridge{Name: "br-ex"})
		return err == nil && len(br.Ports) == 0
	})
}

func TestOVSDetachWaitsForVswitchd(t *testing.T) {
	db := newOVSDB(t)
	a := NewOVSAttacher(db.client, "")
	a.VswitchdTimeout = 400 * time.Millisecond
	ctx := context.Background()
	attach := func() {
		t.Helper()
		if err := a.Attach(ctx, "c1_h", "p1", nil); err != nil {
			t.Fatal(err)
		}
	}

	// No vswitchd: Detach still succeeds, after its bounded wait.
	attach()
	start := time.Now()
	if err := a.Detach(ctx, "c1_h"); err != nil {
		t.Fatalf("Detach without vswitchd: %v", err)
	}
	if took := time.Since(start); took < 400*time.Millisecond || took > 3*time.Second {
		t.Errorf("Detach without vswitchd took %s, want about VswitchdTimeout (400ms)", took)
	}
	if root := db.root(t); root.NextCfg != 1 {
		t.Errorf("next_cfg = %d after one Detach, want 1", root.NextCfg)
	}

	// With vswitchd: Detach returns once it has applied the change.
	db.fakeVswitchd(t)
	attach()
	a.VswitchdTimeout = 10 * time.Second
	start = time.Now()
	if err := a.Detach(ctx, "c1_h"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Detach took %s with vswitchd answering", took)
	}
	if root := db.root(t); root.NextCfg != 2 || root.CurCfg < 2 {
		t.Errorf("after Detach returned: next_cfg %d cur_cfg %d, want vswitchd caught up at 2", root.NextCfg, root.CurCfg)
	}
	// Nothing to detach: no configuration change, no wait.
	if err := a.Detach(ctx, "c1_h"); err != nil || db.root(t).NextCfg != 2 {
		t.Errorf("idle Detach: %v, next_cfg %d", err, db.root(t).NextCfg)
	}
}

func TestOVSAttachInternal(t *testing.T) {
	db := newOVSDB(t)
	a := NewOVSAttacher(db.client, "")
	ctx := context.Background()
	for i := 0; i < 2; i++ { // idempotent
		if err := a.AttachInternal(ctx, "ovn0", "node-n1", "0a:58:64:40:00:02"); err != nil {
			t.Fatalf("AttachInternal #%d: %v", i+1, err)
		}
	}
	checkAttached(t, db, "ovn0", map[string]string{ExtIDIfaceID: "node-n1"})
	i := db.ifaces(t)[0]
	if i.Type != "internal" || i.MAC == nil || *i.MAC != "0a:58:64:40:00:02" {
		t.Fatalf("ovn0 interface type %q MAC %v, want internal with 0a:58:64:40:00:02", i.Type, i.MAC)
	}
	// A changed MAC is written over the old one.
	if err := a.AttachInternal(ctx, "ovn0", "node-n1", "0a:58:64:40:00:09"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new MAC", func() bool { m := db.ifaces(t)[0].MAC; return m != nil && *m == "0a:58:64:40:00:09" })
}

// A pod recreated under its name gets the same iface-id; the earlier sandbox's interface,
// if still attached, must go, or ovn-controller sees two bindings for one port.
func TestOVSAttachRemovesStaleBindingOfSameIfaceID(t *testing.T) {
	db := newOVSDB(t)
	a := NewOVSAttacher(db.client, "")
	ctx := context.Background()
	if err := a.Attach(ctx, "old_h", "web-0.default", map[string]string{ExtIDContainerID: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(ctx, "other_h", "web-1.default", nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Attach(ctx, "new_h", "web-0.default", map[string]string{ExtIDContainerID: "new"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range db.ifaces(t) {
		names = append(names, i.Name+"="+i.ExternalIDs[ExtIDIfaceID])
	}
	slices.Sort(names)
	if want := []string{"new_h=web-0.default", "other_h=web-1.default"}; !slices.Equal(names, want) {
		t.Errorf("interfaces = %v, want %v", names, want)
	}
	if n := len(db.bridge(t).Ports); n != 2 || len(db.ports(t)) != 2 {
		t.Errorf("br-int has %d ports (%d Port rows), want 2", n, len(db.ports(t)))
	}
}
