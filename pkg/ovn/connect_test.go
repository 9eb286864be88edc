package ovn_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/uuid"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb/serverdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// fastCfg keeps retries quick so the tests stay short.
func fastCfg(endpoints ...string) ovn.Config {
	return ovn.Config{
		Endpoints:        endpoints,
		ConnectTimeout:   2 * time.Second,
		RetryInterval:    20 * time.Millisecond,
		MaxRetryInterval: 100 * time.Millisecond,
	}
}

// connectNB connects a full NB client that is closed at the end of the test.
func connectNB(t *testing.T, endpoint string) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovn.ConnectNB(ctx, fastCfg(endpoint))
	if err != nil {
		t.Fatalf("ConnectNB(%s): %v", endpoint, err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestModelsMatchEmbeddedSchemas(t *testing.T) {
	for name, dbModel := range map[string]func() (model.DatabaseModel, error){
		"OVN_Northbound":    nb.DatabaseModel,
		"OVN_Southbound":    sb.DatabaseModel,
		"OVN_IC_Northbound": icnb.DatabaseModel,
		"OVN_IC_Southbound": icsb.DatabaseModel,
		"Open_vSwitch":      vswitch.DatabaseModel,
		"OVN_ClusterSet":    clusterset.DatabaseModel,
	} {
		db, err := dbModel()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if db.Schema.Name != name || len(db.Schema.Tables) == 0 {
			t.Errorf("%s: embedded schema is %q with %d tables", name, db.Schema.Name, len(db.Schema.Tables))
		}
	}
}

func TestConnectFillsCache(t *testing.T) {
	endpoint := ovntest.ServeNB(t)
	writer := connectNB(t, endpoint)
	ctx := context.Background()
	mustTransact(t, writer, addPortOps(t, writer, &nb.LogicalSwitch{Name: "ls1"}, &nb.LogicalSwitchPort{Name: "p1"}), nil)
	if n := len(allPorts(t, writer)); n != 1 {
		t.Fatalf("writer sees %d ports, want 1", n)
	}

	// A second client sees the existing rows right after Connect returns: the monitor's
	// initial dump is in the cache.
	all := connectNB(t, endpoint)
	if got, _ := ovn.Find(ctx, all, func(*nb.LogicalSwitch) bool { return true }); len(got) != 1 || got[0].Name != "ls1" {
		t.Fatalf("full monitor: switches in cache = %+v, want ls1", got)
	}

	// With tables given, only those are monitored.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nbModel, err := nb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	partial, err := ovn.Connect(cctx, nbModel, fastCfg(endpoint), &nb.LogicalSwitch{})
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	if got, _ := ovn.Find(ctx, partial, func(*nb.LogicalSwitch) bool { return true }); len(got) != 1 {
		t.Fatalf("partial monitor: %d switches in cache, want 1", len(got))
	}
	if got, _ := ovn.Find(ctx, partial, func(*nb.LogicalSwitchPort) bool { return true }); len(got) != 0 {
		t.Fatalf("partial monitor: %d ports in cache, want 0 (table not monitored)", len(got))
	}
}

func TestConnectRetriesUntilServerStarts(t *testing.T) {
	sock := ovntest.SocketPath(t)
	var failures atomic.Int32
	cfg := fastCfg("unix:" + sock)
	cfg.Logger = funcr.New(func(_, args string) {
		if strings.Contains(args, "OVSDB not reachable yet") {
			failures.Add(1)
		}
	}, funcr.Options{Verbosity: 1})

	type result struct {
		c   client.Client
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		c, err := ovn.ConnectNB(ctx, cfg)
		done <- result{c, err}
	}()

	// Let Connect fail a few times against a socket that does not exist yet.
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket %s exists before the server started: %v", sock, err)
	}
	ovntest.Serve(t, sock, ovntest.NBModel(t))

	r := <-done
	if r.err != nil {
		t.Fatalf("ConnectNB after late server start: %v", r.err)
	}
	defer r.c.Close()
	if n := failures.Load(); n < 2 {
		t.Fatalf("logged %d failed attempts before the server started, want at least 2", n)
	}
	if !r.c.Connected() {
		t.Fatal("client not connected")
	}
}

func TestConnectTimeoutNamesEndpoint(t *testing.T) {
	endpoint := "unix:" + ovntest.SocketPath(t) // nothing listens there
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ovn.ConnectNB(ctx, fastCfg(endpoint))
	if err == nil {
		t.Fatal("ConnectNB against nothing succeeded")
	}
	if !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "OVN_Northbound") {
		t.Fatalf("error %q does not name the database and endpoint %s", err, endpoint)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %q does not wrap context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "last error") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("error %q does not carry the last connection error", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("ConnectNB took %v to give up on a 300ms context", elapsed)
	}
}

func TestConnectInvalidConfig(t *testing.T) {
	_, err := ovn.ConnectNB(context.Background(), ovn.Config{Endpoints: []string{"tcp:nope"}})
	if err == nil || !strings.Contains(err.Error(), "invalid OVSDB endpoint") {
		t.Fatalf("ConnectNB with a bad endpoint = %v, want a validation error", err)
	}
}

// TestConnectLeaderOnly serves NB next to a _Server database claiming a raft cluster, as
// ovsdb-server does, and checks that LeaderOnly refuses a follower and accepts a leader.
func TestConnectLeaderOnly(t *testing.T) {
	serverClient, err := serverdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	serverModel, errs := model.NewDatabaseModel(serverdb.Schema(), serverClient)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	endpoint := ovntest.Serve(t, ovntest.SocketPath(t), ovntest.NBModel(t), serverModel)

	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	srvc, err := ovn.Connect(cctx, serverClient, fastCfg(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer srvc.Close()
	sid := uuid.NewString()
	row := &serverdb.Database{Name: "OVN_Northbound", Model: serverdb.DatabaseModelClustered, Connected: true, Sid: &sid}
	ops, err := ovn.CreateOrUpdateWithPredicateOps(ctx, srvc, nil, row,
		func(d *serverdb.Database) bool { return d.Name == "OVN_Northbound" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(ctx, srvc, ops); err != nil {
		t.Fatal(err)
	}

	cfg := fastCfg(endpoint)
	cfg.LeaderOnly = true
	// Long enough for an attempt to get an answer on a loaded machine (CI saw every attempt
	// of 500 ms time out); the answer must still be "not leader".
	fctx, fcancel := context.WithTimeout(ctx, 3*time.Second)
	defer fcancel()
	if _, err := ovn.ConnectNB(fctx, cfg); err == nil || !strings.Contains(err.Error(), "not leader") {
		t.Fatalf("LeaderOnly connect to a follower = %v, want a 'not leader' error", err)
	}

	row.Leader = true
	ops, err = ovn.CreateOrUpdateWithPredicateOps(ctx, srvc, nil, row,
		func(d *serverdb.Database) bool { return d.Name == "OVN_Northbound" }, &row.Leader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(ctx, srvc, ops); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	c, err := ovn.ConnectNB(lctx, cfg)
	if err != nil {
		t.Fatalf("LeaderOnly connect to the leader: %v", err)
	}
	c.Close()
}
