package interconnect

import (
	"context"
	"slices"
	"testing"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// TestPortOrderHeldLast: a held gateway comes last on every transit port, in ECMP mode too,
// where the others keep their rotation; For programs those priorities.
func TestPortOrderHeldLast(t *testing.T) {
	in := baseInput()
	in.Gateways = []string{"n1", "n2", "n3"}
	in.TransitSwitches = []string{"kovn-ts", "kovn-ts1", "kovn-ts2"}
	in.Held = []string{"n1"}
	if got := portOrder(in, 0); !slices.Equal(got, []string{"n2", "n3", "n1"}) {
		t.Errorf("active/standby with n1 held: %v, want n2 n3 n1", got)
	}
	in.ECMP = true
	for i, want := range [][]string{{"n2", "n3", "n1"}, {"n2", "n3", "n1"}, {"n3", "n2", "n1"}} {
		if got := portOrder(in, i); !slices.Equal(got, want) {
			t.Errorf("ECMP switch %d with n1 held: %v, want %v", i, got, want)
		}
	}
	rp := For(in).Shard.RouterPorts[2]
	if want := []topology.GatewayChassis{{Chassis: "n3", Priority: 100}, {Chassis: "n2", Priority: 99}, {Chassis: "n1", Priority: 98}}; !slices.Equal(rp.GatewayChassis, want) {
		t.Errorf("%s: %v, want %v", rp.Name, rp.GatewayChassis, want)
	}
}

// TestLostGateways: only a port moving down the order it was programmed with names a lost
// gateway; a failback, a planned reorder, a port first seen or unbound do not.
func TestLostGateways(t *testing.T) {
	ports := []string{"kovn-ts-az1", "kovn-ts1-az1"}
	orders := [][]string{{"n1", "n2"}, {"n2", "n1"}}
	for _, c := range []struct {
		name      string
		orders    [][]string
		prev, now map[string]string
		want      []string
		held      []string
	}{
		{"failover", orders, map[string]string{"kovn-ts-az1": "n1"}, map[string]string{"kovn-ts-az1": "n2"}, []string{"n1"}, nil},
		{"failover on the second switch", orders, map[string]string{"kovn-ts-az1": "n1", "kovn-ts1-az1": "n2"},
			map[string]string{"kovn-ts-az1": "n1", "kovn-ts1-az1": "n1"}, []string{"n2"}, nil},
		{"failback", orders, map[string]string{"kovn-ts-az1": "n2"}, map[string]string{"kovn-ts-az1": "n1"}, nil, nil},
		{"planned reorder", [][]string{{"n2", "n1"}}, map[string]string{"kovn-ts-az1": "n1"}, map[string]string{"kovn-ts-az1": "n2"}, nil, nil},
		{"first seen", orders, nil, map[string]string{"kovn-ts-az1": "n2"}, nil, nil},
		{"unbound", orders, map[string]string{"kovn-ts-az1": "n1"}, map[string]string{}, nil, nil},
		{"bound to a node that is no gateway", orders, map[string]string{"kovn-ts-az1": "n1"}, map[string]string{"kovn-ts-az1": "n9"}, nil, nil},
		{"taken by a held gateway", [][]string{{"n2", "n1"}}, map[string]string{"kovn-ts-az1": "n2"}, map[string]string{"kovn-ts-az1": "n1"}, nil, []string{"n1"}},
	} {
		if got := lostGateways(c.orders, ports, c.prev, c.now, c.held); !slices.Equal(got, c.want) {
			t.Errorf("%s: lost %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBumpNbCfg: each bump returns the new NB_Global.nb_cfg.
func TestBumpNbCfg(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := serveNBWithGlobal(ctx, t)
	for want := int64(1); want <= 2; want++ {
		got, err := ovn.BumpNbCfg(ctx, c)
		if err != nil || got != want {
			t.Fatalf("bump %d: %d %v", want, got, err)
		}
	}
}

// TestUpdateHolds: on an in-memory NB and SB, the gateway whose transit port moved to the
// standby is held (last in the order, nb_cfg bumped, in the status) and stays held until its
// Chassis_Private.nb_cfg reaches the bumped value; a new leader takes the hold over from the
// status.
func TestUpdateHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nbc := serveNBWithGlobal(ctx, t)
	sbModel, err := sb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	sbEndpoint := ovntest.Serve(t, ovntest.SocketPath(t), sbModel)
	health := cluster.NewGatewayHealth([]string{sbEndpoint})
	go func() { _ = health.Start(ctx) }()
	if err := eventuallyTrue(ctx, health.Connected); err != nil {
		t.Fatal("SB monitor:", err)
	}
	sbc, err := ovn.ConnectSB(ctx, ovn.Config{Endpoints: []string{sbEndpoint}})
	if err != nil {
		t.Fatal(err)
	}
	n1 := &sb.ChassisPrivate{Name: "n1"}
	ops, _ := sbc.Create(n1)
	if _, err := ovn.Transact(ctx, sbc, ops); err != nil {
		t.Fatal(err)
	}

	r := &Reconciler{NB: nbc, Health: health}
	ic := &kovnv1.InterConnect{}
	tunnels := func(n2 corev1.ConditionStatus) []corev1.Node {
		cond := func(s corev1.ConditionStatus) []corev1.NodeCondition {
			return []corev1.NodeCondition{{Type: kovnv1.NodeConditionTunnelsUp, Status: s}}
		}
		return []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: cond(corev1.ConditionTrue)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Conditions: cond(n2)}},
			{ObjectMeta: metav1.ObjectMeta{Name: "n3"}, Status: corev1.NodeStatus{Conditions: cond(corev1.ConditionFalse)}}} // no gateway
	}
	nodes := tunnels(corev1.ConditionTrue)
	step := func(bound string) Input {
		t.Helper()
		in := Input{AZ: "az1", Gateways: []string{"n1", "n2"}, TransitSwitches: []string{DefaultTransitSwitch}, SwitchPortKeys: keyedPorts("az1")}
		if _, err := r.updateHolds(ctx, ic, &in, clusterset{portGateway: map[string]string{"kovn-ts-az1": bound}}, nodes); err != nil {
			t.Fatal(err)
		}
		return in
	}
	if in := step("n1"); len(in.Held) != 0 {
		t.Fatalf("first sight: held %v", in.Held)
	}
	if in := step("n2"); !slices.Equal(in.Held, []string{"n1"}) || !slices.Equal(portOrder(in, 0), []string{"n2", "n1"}) {
		t.Fatalf("after n1 lost the port: held %v, order %v", in.Held, portOrder(in, 0))
	}
	hold := r.holds.held["n1"]
	if hold.NbCfg != 1 {
		t.Errorf("hold %+v: want nb_cfg 1 (one bump)", hold)
	}
	if in := step("n2"); !slices.Equal(in.Held, []string{"n1"}) {
		t.Fatalf("n1 not caught up: held %v", in.Held)
	}
	// A new leader reads the hold from the status.
	ic.Status.Gateways = []kovnv1.InterConnectGateway{{Node: "n2", Priority: 100}, {Node: "n1", Priority: 99, Held: &hold}}
	r2 := &Reconciler{NB: nbc, Health: health}
	in := Input{AZ: "az1", Gateways: []string{"n1", "n2"}, TransitSwitches: []string{DefaultTransitSwitch}, SwitchPortKeys: keyedPorts("az1")}
	if pending, err := r2.updateHolds(ctx, ic, &in, clusterset{portGateway: map[string]string{"kovn-ts-az1": "n2"}}, nodes); err != nil || !pending || !slices.Equal(in.Held, []string{"n1"}) {
		t.Fatalf("new leader: held %v pending %v %v", in.Held, pending, err)
	}

	n1.NbCfg = 1
	ops, _ = sbc.Where(n1).Update(n1, &n1.NbCfg)
	if _, err := ovn.Transact(ctx, sbc, ops); err != nil {
		t.Fatal(err)
	}
	if err := eventuallyTrue(ctx, func() bool { ok, _ := health.CaughtUp("n1", 1); return ok }); err != nil {
		t.Fatal("n1 caught up:", err)
	}
	// In step, but held for holdMin: the daemons' BFD reports may still be of before the failure.
	if in := step("n2"); !slices.Equal(in.Held, []string{"n1"}) {
		t.Fatalf("n1 caught up within holdMin: held %v, want n1", in.Held)
	}
	h := r.holds.held["n1"]
	h.Since = metav1.NewTime(h.Since.Add(-holdMin))
	r.holds.held["n1"] = h
	// n2 still sees a BFD session down (n1's, a link just back): n1 stays held, or both claim.
	nodes = tunnels(corev1.ConditionFalse)
	if in := step("n2"); !slices.Equal(in.Held, []string{"n1"}) {
		t.Fatalf("n2's BFD sessions not up: held %v, want n1", in.Held)
	}
	nodes = tunnels(corev1.ConditionTrue)
	if in := step("n2"); len(in.Held) != 0 || !slices.Equal(portOrder(in, 0), []string{"n1", "n2"}) {
		t.Fatalf("n1 caught up: held %v, order %v", in.Held, portOrder(in, 0))
	}
	// Failing back (n2 -> n1) holds nobody.
	if in := step("n1"); len(in.Held) != 0 {
		t.Fatalf("failback: held %v", in.Held)
	}
	var rows []nb.NBGlobal
	if err := nbc.List(ctx, &rows); err != nil || len(rows) != 1 || rows[0].NbCfg != 1 {
		t.Errorf("NB_Global %+v %v: want nb_cfg bumped once", rows, err)
	}
}

func eventuallyTrue(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// serveNBWithGlobal serves an in-memory NB with its NB_Global row and connects to it.
func serveNBWithGlobal(ctx context.Context, t *testing.T) libovsdb.Client {
	t.Helper()
	c, err := ovn.ConnectNB(ctx, ovn.Config{Endpoints: []string{ovntest.ServeNB(t)}})
	if err != nil {
		t.Fatal(err)
	}
	ovntest.CreateNBGlobal(t, c)
	return c
}
