package icauthz

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
	"github.com/kovn/kovn/pkg/pki"
)

// relayLab serves an in-memory IC-SB (with OVN_ClusterSet) behind a Relay on 127.0.0.1 and
// returns the relay's endpoint and a directory of identities: the server, az1, az2, and
// "stranger" from another CA.
func relayLab(ctx context.Context, t *testing.T) (string, string) {
	sbModel, err := icsb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	csModel, err := clusterset.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	upstream := ovntest.Serve(t, ovntest.SocketPath(t), sbModel, csModel)
	dir := t.TempDir()
	ca, err := pki.NewCA("clusterset CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]pki.Request{
		"server": {CommonName: "ovn-ic-db", IPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Usage: pki.Server, Validity: time.Hour},
		"az1":    {CommonName: "az1", Usage: pki.Client, Validity: time.Hour}, "az2": {CommonName: "az2", Usage: pki.Client, Validity: time.Hour},
		"stranger": {CommonName: "az2", Usage: pki.Client, Validity: time.Hour},
	} {
		issuer := ca
		if name == "stranger" {
			issuer = other
		}
		cert, key, err := issuer.Issue(req)
		if err != nil {
			t.Fatal(err)
		}
		for file, data := range map[string][]byte{".crt": cert, ".key": key, ".ca": ca.CertPEM} {
			if err := os.WriteFile(filepath.Join(dir, name+file), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	view, err := ConnectView(ctx, upstream)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	id := func(n string) string { return filepath.Join(dir, n) }
	r := &Relay{Upstream: strings.TrimPrefix(upstream, "unix:"), View: view, Log: testr.New(t),
		Credentials: ovn.FileCredentials(id("server.crt"), id("server.key"), id("server.ca"))}
	go func() { _ = r.ServeListener(ctx, ln) }()
	return "ssl:" + ln.Addr().String(), dir
}

func connectAs(ctx context.Context, t *testing.T, ep, dir, name string, full func() (model.ClientDBModel, error)) (libovsdb.Client, error) {
	m, err := full()
	if err != nil {
		t.Fatal(err)
	}
	cfg := ovn.Config{Endpoints: []string{ep}, Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"),
		CACert: filepath.Join(dir, name+".ca"), ConnectTimeout: 2 * time.Second, RetryInterval: 100 * time.Millisecond, MaxRetryInterval: 200 * time.Millisecond}
	c, err := ovn.Connect(ctx, m, cfg)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func transact(ctx context.Context, t *testing.T, c libovsdb.Client, build func() ([]ovsdb.Operation, error)) ([]ovsdb.OperationResult, error) {
	t.Helper()
	ops, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return ovn.Transact(ctx, c, ops)
}

// TestRelay: through the relay, az2's certificate cannot delete, change or forge az1's
// IC-SB rows or OVN_ClusterSet exports (each refused with a permission error, the rows
// unchanged); a delete by another column reaches only az2's own rows; each AZ writes its own;
// a certificate of another CA does not connect.
func TestRelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, dir := relayLab(ctx, t)
	az1, err := connectAs(ctx, t, ep, dir, "az1", icsb.FullDatabaseModel)
	if err != nil {
		t.Fatal(err)
	}
	az2, err := connectAs(ctx, t, ep, dir, "az2", icsb.FullDatabaseModel)
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	if _, err := connectAs(short, t, ep, dir, "stranger", icsb.FullDatabaseModel); err == nil {
		t.Error("a certificate of another CA connected")
	}
	stop()

	insertAZ := func(c libovsdb.Client, name, prefix string) {
		t.Helper()
		az := &icsb.AvailabilityZone{UUID: ovn.NewNamedUUID(), Name: name}
		route := &icsb.Route{UUID: ovn.NewNamedUUID(), AvailabilityZone: az.UUID, IPPrefix: prefix, Nexthop: "169.254.100.1",
			TransitSwitch: "ts", Origin: icsb.RouteOriginConnected}
		if _, err := transact(ctx, t, c, func() ([]ovsdb.Operation, error) { return c.Create(az, route) }); err != nil {
			t.Fatalf("%s inserting itself: %v", name, err)
		}
	}
	insertAZ(az1, "az1", "10.1.0.0/16")
	insertAZ(az2, "az2", "10.2.0.0/16")
	var r1 icsb.Route
	waitRow(ctx, t, az2, func(r *icsb.Route) bool { return r.IPPrefix == "10.1.0.0/16" }, &r1)
	refused := func(what string, build func() ([]ovsdb.Operation, error)) {
		t.Helper()
		if _, err := transact(ctx, t, az2, build); err == nil || !strings.Contains(err.Error(), "permission error") {
			t.Errorf("az2 %s: %v, want a permission error", what, err)
		}
	}
	refused("deleting az1's route", func() ([]ovsdb.Operation, error) { return az2.Where(&icsb.Route{UUID: r1.UUID}).Delete() })
	refused("changing az1's route", func() ([]ovsdb.Operation, error) {
		r := r1
		r.Nexthop = "169.254.100.2"
		return az2.Where(&r).Update(&r, &r.Nexthop)
	})
	refused("inserting a route under az1", func() ([]ovsdb.Operation, error) {
		return az2.Create(&icsb.Route{AvailabilityZone: r1.AvailabilityZone, IPPrefix: "10.1.0.0/28", Nexthop: "169.254.100.2", TransitSwitch: "ts", Origin: icsb.RouteOriginConnected})
	})
	refused("making up an AZ", func() ([]ovsdb.Operation, error) { return az2.Create(&icsb.AvailabilityZone{Name: "az-rogue"}) })
	// A delete by prefix runs, bound to az2's rows: az1's route stays.
	if _, err := ovn.Transact(ctx, az2, []ovsdb.Operation{{Op: ovsdb.OperationDelete, Table: "Route",
		Where: []ovsdb.Condition{{Column: "ip_prefix", Function: ovsdb.ConditionEqual, Value: "10.1.0.0/16"}}}}); err != nil {
		t.Errorf("az2 deleting by prefix: %v", err)
	}
	r := r1
	r.Nexthop = "169.254.100.3"
	if _, err := transact(ctx, t, az1, func() ([]ovsdb.Operation, error) { return az1.Where(&r).Update(&r, &r.Nexthop) }); err != nil {
		t.Errorf("az1 changing its own route: %v", err)
	}
	waitRow(ctx, t, az2, func(r *icsb.Route) bool { return r.IPPrefix == "10.1.0.0/16" && r.Nexthop == "169.254.100.3" }, &r1)
	if err := az2.Get(ctx, &icsb.AvailabilityZone{UUID: r1.AvailabilityZone}); err != nil {
		t.Errorf("az1's AZ row: %v", err)
	}

	cs1, err := connectAs(ctx, t, ep, dir, "az1", clusterset.FullDatabaseModel)
	if err != nil {
		t.Fatal(err)
	}
	cs2, err := connectAs(ctx, t, ep, dir, "az2", clusterset.FullDatabaseModel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transact(ctx, t, cs1, func() ([]ovsdb.Operation, error) {
		return cs1.Create(&clusterset.Cluster{UUID: ovn.NewNamedUUID(), Name: "c1", AvailabilityZone: "az1"})
	}); err != nil {
		t.Fatalf("az1 registering c1: %v", err)
	}
	if _, err := transact(ctx, t, cs1, func() ([]ovsdb.Operation, error) {
		return cs1.Create(&clusterset.ServiceExport{UUID: ovn.NewNamedUUID(), Cluster: "c1", Namespace: "ns", Name: "web"})
	}); err != nil {
		t.Fatalf("az1 exporting: %v", err)
	}
	var e1 clusterset.ServiceExport
	waitRow(ctx, t, cs2, func(e *clusterset.ServiceExport) bool { return e.Name == "web" }, &e1)
	if _, err := transact(ctx, t, cs2, func() ([]ovsdb.Operation, error) { return cs2.Where(&e1).Delete() }); err == nil || !strings.Contains(err.Error(), "permission error") {
		t.Errorf("az2 deleting c1's export: %v, want a permission error", err)
	}
	if _, err := transact(ctx, t, cs2, func() ([]ovsdb.Operation, error) {
		return cs2.Create(&clusterset.ServiceExport{Cluster: "c1", Namespace: "ns", Name: "evil"})
	}); err == nil || !strings.Contains(err.Error(), "permission error") {
		t.Errorf("az2 exporting as c1: %v, want a permission error", err)
	}
	if err := cs2.Get(ctx, &clusterset.ServiceExport{UUID: e1.UUID}); err != nil {
		t.Errorf("c1's export after az2's attempts: %v", err)
	}
}

// waitRow waits until c's cache holds a row of out's type matching pred, and copies it to out.
func waitRow[T any](ctx context.Context, t *testing.T, c libovsdb.Client, pred func(*T) bool, out *T) {
	t.Helper()
	for {
		var rows []T
		if err := c.WhereCache(pred).List(ctx, &rows); err == nil && len(rows) == 1 {
			*out = rows[0]
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no matching %T row", out)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
