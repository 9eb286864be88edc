package interconnect

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
)

// TestGuardICSB: az2's certificate writes under az1's name a route via its own transit
// address, a gateway of its own, a second tunnel endpoint on az1's gateway and a binding of
// az1's port to its gateway. az1's pass removes the route, the gateway and the endpoint,
// leaves the binding (ovn-ic's) and reports all four; az1's own rows and az2's stay. A route
// added and gone before the pass (its ovn-ic was quicker) is reported too.
func TestGuardICSB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := serveICSB(ctx, t)
	create := func(rows ...model.Model) {
		t.Helper()
		var ops []ovsdb.Operation
		for _, m := range rows {
			o, err := c.Create(m)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, o...)
		}
		if _, err := ovn.Transact(ctx, c, ops); err != nil {
			t.Fatal(err)
		}
	}
	az1, az2 := &icsb.AvailabilityZone{UUID: ovn.NewNamedUUID(), Name: "az1"}, &icsb.AvailabilityZone{UUID: ovn.NewNamedUUID(), Name: "az2"}
	e1, e2 := &icsb.Encap{UUID: ovn.NewNamedUUID(), GatewayName: "c1-n1", IP: "172.30.1.11", Type: icsb.EncapTypeGeneve},
		&icsb.Encap{UUID: ovn.NewNamedUUID(), GatewayName: "c2-n1", IP: "172.30.2.11", Type: icsb.EncapTypeGeneve}
	create(az1, az2, e1, e2,
		&icsb.Gateway{Name: "c1-n1", AvailabilityZone: az1.UUID, Encaps: []string{e1.UUID}},
		&icsb.Gateway{Name: "c2-n1", AvailabilityZone: az2.UUID, Encaps: []string{e2.UUID}},
		&icsb.Route{AvailabilityZone: az1.UUID, IPPrefix: "10.16.0.0/16", Nexthop: "169.254.100.1", TransitSwitch: "kovn-ts", Origin: icsb.RouteOriginConnected},
		&icsb.Route{AvailabilityZone: az2.UUID, IPPrefix: "10.17.0.0/16", Nexthop: "169.254.100.2", TransitSwitch: "kovn-ts", Origin: icsb.RouteOriginConnected},
		&icsb.PortBinding{AvailabilityZone: az1.UUID, LogicalPort: "kovn-ts-az1", TransitSwitch: "kovn-ts", TunnelKey: 1, Gateway: "c1-n1"},
		&icsb.PortBinding{AvailabilityZone: az2.UUID, LogicalPort: "kovn-ts-az2", TransitSwitch: "kovn-ts", TunnelKey: 2, Gateway: "c2-n1"})
	var azs []icsb.AvailabilityZone
	waitFor(t, "the rows in the cache", func() bool { azs = nil; _ = c.List(ctx, &azs); return len(azs) == 2 })
	uuidOf := map[string]string{}
	for _, a := range azs {
		uuidOf[a.Name] = a.UUID
	}

	log := &tamper.Log{}
	r := &Reconciler{Tamper: log}
	c.Cache().AddEventHandler(&cacheInspector{r.icsbRows.inspect})
	in := Input{AZ: "az1", NodeIPs: []netip.Addr{netip.MustParseAddr("172.30.1.11")}}
	lrp, lsp := RouterPortName("az1", "kovn-ts"), SwitchPortName("az1", "kovn-ts")
	d := Desired{Shard: topology.Shard{RouterPorts: []topology.RouterPort{{Name: lrp, Networks: []string{"169.254.100.1/24"}}},
		SwitchPorts: []topology.SwitchPort{{Switch: "kovn-ts", Name: lsp, Options: map[string]string{"router-port": lrp}}}}}
	pass := func() *joinRun {
		t.Helper()
		cs, err := readClusterset(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		run := &joinRun{ic: &kovnv1.InterConnect{}, icsb: c, cs: cs, in: in,
			nodes: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "c1-n1"}}}}
		if err := r.guardICSB(ctx, run, d); err != nil {
			t.Fatal(err)
		}
		return run
	}
	if run := pass(); degradedMessage(run.ic) != "" {
		t.Fatalf("a clusterset of own rows only reported: %s", degradedMessage(run.ic))
	}

	// The route ovn-ic removed before the pass: seen by the events alone.
	quick := &icsb.Route{UUID: ovn.NewNamedUUID(), AvailabilityZone: uuidOf["az1"], IPPrefix: "10.16.9.0/24", Nexthop: "169.254.100.2",
		TransitSwitch: "kovn-ts", Origin: icsb.RouteOriginConnected}
	create(quick)
	var routes []icsb.Route
	waitFor(t, "the quick route cached", func() bool { routes = nil; _ = c.List(ctx, &routes); return len(routes) == 3 })
	del, err := c.WhereCache(func(r *icsb.Route) bool { return r.IPPrefix == "10.16.9.0/24" }).Delete()
	if err != nil || len(del) == 0 {
		t.Fatalf("deleting the quick route: %v %v", err, del)
	}
	if _, err := ovn.Transact(ctx, c, del); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the quick route gone", func() bool { routes = nil; _ = c.List(ctx, &routes); return len(routes) == 2 })

	evil := &icsb.Encap{UUID: ovn.NewNamedUUID(), GatewayName: "c1-n1", IP: "172.30.2.12", Type: icsb.EncapTypeGeneve}
	evilGW := &icsb.Encap{UUID: ovn.NewNamedUUID(), GatewayName: "evil", IP: "172.30.2.13", Type: icsb.EncapTypeGeneve}
	create(evilGW,
		&icsb.Gateway{Name: "evil", AvailabilityZone: uuidOf["az1"], Encaps: []string{evilGW.UUID}},
		&icsb.Route{AvailabilityZone: uuidOf["az1"], IPPrefix: "10.16.5.0/24", Nexthop: "169.254.100.2", TransitSwitch: "kovn-ts", Origin: icsb.RouteOriginConnected})
	var gws []icsb.Gateway
	waitFor(t, "the evil gateway cached", func() bool { gws = nil; _ = c.List(ctx, &gws); return len(gws) == 3 })
	gw := &icsb.Gateway{Name: "c1-n1"}
	if err := c.Get(ctx, gw); err != nil {
		t.Fatal(err)
	}
	mut, _ := c.Where(gw).Mutate(gw, model.Mutation{Field: &gw.Encaps, Mutator: ovsdb.MutateOperationInsert, Value: []string{evil.UUID}})
	pb := &icsb.PortBinding{LogicalPort: "kovn-ts-az1"}
	if err := c.Get(ctx, pb); err != nil {
		t.Fatal(err)
	}
	pb.Gateway = "c2-n1"
	upd, _ := c.Where(pb).Update(pb, &pb.Gateway)
	add, _ := c.Create(evil) // with the mutation: an Encap nothing refers to is collected at once
	if _, err := ovn.Transact(ctx, c, append(append(add, mut...), upd...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the binding changed in the cache", func() bool { _ = c.Get(ctx, pb); return pb.Gateway == "c2-n1" })

	var encaps []icsb.Encap
	_ = c.List(ctx, &encaps)
	evilUUID := ""
	for _, e := range encaps {
		if e.IP == evil.IP {
			evilUUID = e.UUID
		}
	}
	before := testutil.ToFloat64(tamper.Restored)
	run := pass()
	msg := degradedMessage(run.ic)
	for _, want := range []string{"a route to 10.16.9.0/24 via 169.254.100.2", "a route to 10.16.5.0/24 via 169.254.100.2",
		`a gateway "evil"`, "tunnel endpoint 172.30.2.12 of gateway c1-n1", `the binding of kovn-ts-az1 to gateway "c2-n1"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("Degraded does not name %q: %s", want, msg)
		}
	}
	if got := testutil.ToFloat64(tamper.Restored) - before; got != 5 {
		t.Errorf("%v rows counted restored, want 5", got)
	}
	waitFor(t, "the foreign route, gateway and endpoint removed", func() bool {
		routes = nil
		_ = c.List(ctx, &routes)
		gws = nil
		_ = c.List(ctx, &gws)
		_ = c.Get(ctx, gw)
		return len(routes) == 2 && len(gws) == 2 && len(gw.Encaps) == 1 && gw.Encaps[0] != evilUUID
	})
	for _, r := range routes {
		if r.IPPrefix == "10.16.5.0/24" {
			t.Errorf("the foreign route stays: %+v", r)
		}
	}
}

// TestOwnRowsSettle: a transit address, node or node address this AZ just gave up still counts
// as its own for ownSettle (its ovn-ic rewrites the rows a moment later), then no more.
func TestOwnRowsSettle(t *testing.T) {
	var g icsbGuard
	t0 := time.Unix(1000, 0)
	old := map[string][]netip.Addr{"kovn-ts": {netip.MustParseAddr("169.254.100.1")}}
	g.update("az1", "u1", []string{"n1"}, nil, old, t0)
	moved := map[string][]netip.Addr{"kovn-ts": {netip.MustParseAddr("169.254.100.3")}}
	own, _ := g.update("az1", "u1", []string{"n2"}, nil, moved, t0.Add(time.Second))
	route := func(nh string) *icsb.Route {
		return &icsb.Route{AvailabilityZone: "u1", IPPrefix: "10.16.0.0/16", Nexthop: nh, TransitSwitch: "kovn-ts"}
	}
	for _, tc := range []struct {
		m     model.Model
		after time.Duration
		bad   bool
	}{
		{route("169.254.100.3"), time.Hour, false},
		{route("169.254.100.1"), 30 * time.Second, false},
		{route("169.254.100.1"), ownSettle + 2*time.Second, true},
		{route("169.254.100.2"), 0, true},
		{&icsb.Gateway{AvailabilityZone: "u1", Name: "n1"}, 30 * time.Second, false},
		{&icsb.Gateway{AvailabilityZone: "u1", Name: "n1"}, ownSettle + 2*time.Second, true},
		{&icsb.Route{AvailabilityZone: "u1", Nexthop: "169.254.100.9", TransitSwitch: "other-ts"}, 0, false}, // not judged
		{&icsb.Route{AvailabilityZone: "u2", Nexthop: "169.254.100.9", TransitSwitch: "kovn-ts"}, 0, false},  // another AZ's
	} {
		if why := own.foreignRow(tc.m, t0.Add(time.Second+tc.after)); (why != "") != tc.bad {
			t.Errorf("%+v %v later: refused %q, want refused %v", tc.m, tc.after, why, tc.bad)
		}
	}
}

type cacheInspector struct{ inspect func(string, model.Model) }

func (c *cacheInspector) OnAdd(table string, m model.Model)       { c.inspect(table, m) }
func (c *cacheInspector) OnUpdate(table string, _, m model.Model) { c.inspect(table, m) }
func (c *cacheInspector) OnDelete(string, model.Model)            {}

func degradedMessage(ic *kovnv1.InterConnect) string {
	for _, c := range ic.Status.Conditions {
		if c.Type == kovnv1.ConditionDegraded && c.Status == metav1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
