// Package ovntest runs libovsdb's in-memory OVSDB server for tests, so code that talks to
// OVN is tested against a real server speaking the real protocol with the real schemas
// (the ones embedded beside the generated models), not against mocks.
package ovntest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/database/inmemory"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/server"

	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// libovsdb's server package turns the global stdr verbosity up to 5 in its init, which logs
// every row of every transaction; tests only need the errors.
func init() { stdr.SetVerbosity(0) }

// SocketPath returns a fresh unix socket path removed at the end of the test. It is kept
// short on purpose: t.TempDir() under a long test name can exceed the 108-byte sun_path
// limit, and the listen would fail with a confusing "invalid argument".
func SocketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ovsdb")
	if err != nil {
		t.Fatalf("creating socket dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "db.sock")
}

// Serve serves dbs from a new in-memory database on the unix socket sock and returns the
// endpoint ("unix:" + sock) once the server accepts connections. The server is closed at
// the end of the test; register clients after calling Serve so they are closed first.
func Serve(t testing.TB, sock string, dbs ...model.DatabaseModel) string {
	t.Helper()
	clientModels := make(map[string]model.ClientDBModel, len(dbs))
	for _, db := range dbs {
		clientModels[db.Schema.Name] = db.Client()
	}
	srv, err := server.NewOvsdbServer(inmemory.NewDatabase(clientModels), dbs...)
	if err != nil {
		t.Fatalf("creating in-memory OVSDB server: %v", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve("unix", sock) }()
	t.Cleanup(srv.Close)
	deadline := time.Now().Add(10 * time.Second)
	for !srv.Ready() {
		select {
		case err := <-serveErr:
			t.Fatalf("in-memory OVSDB server on %s: %v", sock, err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("in-memory OVSDB server on %s not ready after 10s", sock)
		}
	}
	return "unix:" + sock
}

// NBModel returns the OVN_Northbound database model, failing the test on error.
func NBModel(t testing.TB) model.DatabaseModel {
	t.Helper()
	db, err := nb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// ServeNB serves an empty OVN_Northbound database and returns its endpoint.
func ServeNB(t testing.TB) string {
	t.Helper()
	return Serve(t, SocketPath(t), NBModel(t))
}

// CreateNBGlobal inserts the NB_Global row, as ovn-northd does when it first connects to a
// new database, and waits until c's cache holds it.
func CreateNBGlobal(t testing.TB, c client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ops, err := c.Create(&nb.NBGlobal{})
	if err == nil {
		_, err = c.Transact(ctx, ops...)
	}
	if err != nil {
		t.Fatalf("creating NB_Global: %v", err)
	}
	for {
		var rows []*nb.NBGlobal
		if err := c.List(ctx, &rows); err == nil && len(rows) == 1 {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("NB_Global not in the client cache")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
