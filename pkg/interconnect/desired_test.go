package interconnect

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/icnb"
	"github.com/kovn/kovn/pkg/ovn/model/icsb"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func baseInput() Input {
	return Input{AZ: "az1", Router: "ovn-cluster", TransitSwitches: []string{DefaultTransitSwitch}, TransitIndex: 3, IPv4: true, IPv6: true,
		Gateways: []string{"n1", "n2"}, LocalCIDRs: pfx("10.16.0.0/16", "fd00:10:16::/64"),
		JoinCIDRs: pfx("100.64.0.0/16", "fd00:100:64::/112"), NodeIPs: []netip.Addr{netip.MustParseAddr("172.30.1.11")},
		Remote:   map[string][]netip.Prefix{"az2": pfx("10.17.0.0/16", "fd00:10:17::/64")},
		Declared: map[string][]netip.Prefix{"az2": pfx("10.17.0.0/16", "fd00:10:17::/64")}, BFD: BFD{60, 60, 3},
		SwitchPortKeys: keyedPorts("az1")}
}

// keyedPorts are tunnel keys for az's switch port on every kovn transit switch, as ovn-ic
// gives them once the AZ joined.
func keyedPorts(az string) map[string]string {
	keys := map[string]string{}
	for i := range MaxTransitSwitches {
		keys[SwitchPortName(az, TransitSwitchName(i))] = fmt.Sprint(i + 1)
	}
	return keys
}

// TestForPortsAndGateways: the transit router port has this AZ's host number on both transit
// networks and one gateway chassis per gateway, the first preferred; its switch port names it.
func TestForPortsAndGateways(t *testing.T) {
	d := For(baseInput())
	rp := d.Shard.RouterPorts[0]
	if rp.Name != "az1-kovn-ts" || rp.Router != "ovn-cluster" || !slices.Equal(rp.Networks, []string{"169.254.100.3/24", "fd00:a9fe:64::3/112"}) ||
		!slices.Equal(rp.GatewayChassis, []topology.GatewayChassis{{Chassis: "n1", Priority: 100}, {Chassis: "n2", Priority: 99}}) {
		t.Errorf("router port %+v", rp)
	}
	sp := d.Shard.SwitchPorts[0]
	if sp.Switch != DefaultTransitSwitch || sp.Name != "kovn-ts-az1" || sp.Type != "router" || sp.Options["router-port"] != rp.Name {
		t.Errorf("switch port %+v", sp)
	}
}

// TestForECMP: on every transit switch the AZ has a router port with its host number on that
// switch's networks; in ECMP mode switch i prefers gateway i (the others follow in turn, so a
// lost gateway's switch fails over to the next), in active/standby every switch prefers the
// first gateway. Each transit network is denied.
func TestForECMP(t *testing.T) {
	in := baseInput()
	in.Gateways = []string{"n1", "n2", "n3"}
	in.TransitSwitches = []string{"kovn-ts", "kovn-ts1", "kovn-ts2", "kovn-ts3"}
	in.ECMP = true
	d := For(in)
	gw := func(names ...string) []topology.GatewayChassis {
		var out []topology.GatewayChassis
		for i, n := range names {
			out = append(out, topology.GatewayChassis{Chassis: n, Priority: 100 - i})
		}
		return out
	}
	want := []struct {
		name, lsp string
		nets      []string
		gws       []topology.GatewayChassis
	}{
		{"az1-kovn-ts", "kovn-ts-az1", []string{"169.254.100.3/24", "fd00:a9fe:64::3/112"}, gw("n1", "n2", "n3")},
		{"az1-kovn-ts1", "kovn-ts1-az1", []string{"169.254.101.3/24", "fd00:a9fe:64::1:3/112"}, gw("n2", "n3", "n1")},
		{"az1-kovn-ts2", "kovn-ts2-az1", []string{"169.254.102.3/24", "fd00:a9fe:64::2:3/112"}, gw("n3", "n1", "n2")},
		{"az1-kovn-ts3", "kovn-ts3-az1", []string{"169.254.103.3/24", "fd00:a9fe:64::3:3/112"}, gw("n1", "n2", "n3")},
	}
	if len(d.Shard.RouterPorts) != len(want) || len(d.Shard.SwitchPorts) != len(want) {
		t.Fatalf("%d router ports, %d switch ports, want %d each", len(d.Shard.RouterPorts), len(d.Shard.SwitchPorts), len(want))
	}
	for i, w := range want {
		rp, sp := d.Shard.RouterPorts[i], d.Shard.SwitchPorts[i]
		if rp.Name != w.name || !slices.Equal(rp.Networks, w.nets) || !slices.Equal(rp.GatewayChassis, w.gws) {
			t.Errorf("router port %d: %+v, want %s %v %v", i, rp, w.name, w.nets, w.gws)
		}
		if sp.Name != w.lsp || sp.Switch != in.TransitSwitches[i] || sp.Options["router-port"] != w.name {
			t.Errorf("switch port %d: %+v", i, sp)
		}
	}
	deny := strings.Split(d.Options["ic-route-blacklist"], ",")
	for _, n := range []string{"169.254.100.0/24", "169.254.103.0/24", "fd00:a9fe:64::/112", "fd00:a9fe:64::3:0/112"} {
		if !slices.Contains(deny, n) {
			t.Errorf("deny list %v lacks transit network %s", deny, n)
		}
	}
	in.ECMP = false
	for _, rp := range For(in).Shard.RouterPorts {
		if !slices.Equal(rp.GatewayChassis, gw("n1", "n2", "n3")) {
			t.Errorf("active/standby: %s prefers %v, want n1 first everywhere", rp.Name, rp.GatewayChassis)
		}
	}
}

func TestTransitSwitchNames(t *testing.T) {
	for i := 0; i < MaxTransitSwitches; i++ {
		if got, ok := transitSwitchIndex(TransitSwitchName(i)); !ok || got != i {
			t.Errorf("%s: %d %v", TransitSwitchName(i), got, ok)
		}
	}
	for _, n := range []string{"kovn-ts0", "kovn-ts01", "kovn-ts8", "kovn-ts-1", "other", "kovn-tsx"} {
		if _, ok := transitSwitchIndex(n); ok {
			t.Errorf("%s taken for a kovn transit switch", n)
		}
	}
}

// TestForDenyListAndLearned: the join subnet, node addresses, transit networks and refused
// CIDRs are denied; with AdvertiseCIDRs, local subnets outside them are too; remote prefixes
// become allow policies unless denied or overlapping a local subnet (a conflict, named).
func TestForDenyListAndLearned(t *testing.T) {
	in := baseInput()
	in.RefuseCIDRs = pfx("192.168.0.0/16")
	in.LocalCIDRs = append(in.LocalCIDRs, netip.MustParsePrefix("10.99.0.0/24"))
	in.AdvertiseCIDRs = pfx("10.16.0.0/15", "fd00:10:16::/64")
	in.Remote["az3"] = pfx("10.16.128.0/17", "192.168.1.0/24", "10.18.0.0/16")
	in.Declared["az3"] = in.Remote["az3"]
	d := For(in)
	deny := strings.Split(d.Options["ic-route-blacklist"], ",")
	for _, want := range []string{"100.64.0.0/16", "fd00:100:64::/112", "172.30.1.11/32", "169.254.100.0/24", "fd00:a9fe:64::/112",
		"192.168.0.0/16", "10.99.0.0/24"} {
		if !slices.Contains(deny, want) {
			t.Errorf("deny list %v lacks %s", deny, want)
		}
	}
	if slices.Contains(deny, "10.16.0.0/16") {
		t.Errorf("deny list %v holds an advertised subnet", deny)
	}
	var matches []string
	for _, p := range d.Shard.Policies {
		if p.Action != "allow" || p.Priority != topology.PriorityAllowCluster {
			t.Errorf("policy %+v", p)
		}
		matches = append(matches, p.Match)
	}
	want := []string{"ip4.dst == 10.17.0.0/16", "ip4.dst == 10.18.0.0/16", "ip6.dst == fd00:10:17::/64"}
	if !slices.Equal(matches, want) {
		t.Errorf("allow policies %v, want %v", matches, want)
	}
	if len(d.Conflicts) != 1 || d.Conflicts[0].AZ != "az3" || d.Conflicts[0].Remote.String() != "10.16.128.0/17" ||
		d.Conflicts[0].Local.String() != "10.16.0.0/16" {
		t.Errorf("conflicts %v", d.Conflicts)
	}
	if d.Options["ic-route-adv"] != "true" || d.Options["ic-route-learn"] != "true" || d.Options["bfd-min-rx"] != "60" || d.Options["bfd-mult"] != "3" {
		t.Errorf("options %v", d.Options)
	}
}

// TestTransitIndex: the current number is kept unless another AZ took it; else the lowest free.
func TestTransitIndex(t *testing.T) {
	cs := clusterset{portAddrs: map[string][]netip.Addr{"az2": {netip.MustParseAddr("169.254.100.1")},
		"az1": {netip.MustParseAddr("169.254.100.5")}}}
	for _, c := range []struct{ current, want int }{{5, 5}, {0, 2}, {1, 2}} {
		if got, err := cs.transitIndex(c.current, "az1"); err != nil || got != c.want {
			t.Errorf("current %d: got %d, %v; want %d", c.current, got, err, c.want)
		}
	}
	// az1 renamed az1r: IC-SB still holds az1's port; its number is az1r's own, not taken.
	if got, err := cs.transitIndex(5, "az1r", "az1"); err != nil || got != 5 {
		t.Errorf("renamed: got %d, %v; want 5", got, err)
	}
}

// TestApplyNBGlobal: the AZ name and owned options are set, other keys kept; a changed value
// replaces the old; leaving clears the name and the owned keys only; unchanged sends nothing.
func TestApplyNBGlobal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := serveNBWithGlobal(ctx, t)
	get := func() nb.NBGlobal {
		var rows []nb.NBGlobal
		if err := c.List(ctx, &rows); err != nil || len(rows) != 1 {
			t.Fatalf("NB_Global: %v %v", rows, err)
		}
		return rows[0]
	}
	row := get()
	row.Options = map[string]string{"northd-probe": "5000", "ic-route-adv": "false"}
	ops, _ := c.Where(&row).Update(&row, &row.Options)
	if _, err := ovn.Transact(ctx, c, ops); err != nil {
		t.Fatal(err)
	}
	wait := func(f func(nb.NBGlobal) bool) nb.NBGlobal {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if g := get(); f(g) {
				return g
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("NB_Global not as expected: %+v", get())
		return nb.NBGlobal{}
	}
	wait(func(g nb.NBGlobal) bool { return g.Options["ic-route-adv"] == "false" })
	opts := For(baseInput()).Options
	if err := applyNBGlobal(ctx, c, "az1", opts); err != nil {
		t.Fatal(err)
	}
	g := wait(func(g nb.NBGlobal) bool { return g.Name == "az1" && g.Options["ic-route-adv"] == "true" })
	if g.Options["northd-probe"] != "5000" || g.Options["ic-route-blacklist"] != opts["ic-route-blacklist"] {
		t.Errorf("options %v", g.Options)
	}
	if err := applyNBGlobal(ctx, c, "", nil); err != nil {
		t.Fatal(err)
	}
	g = wait(func(g nb.NBGlobal) bool { return g.Name == "" && g.Options["ic-route-adv"] == "" })
	if len(g.Options) != 1 || g.Options["northd-probe"] != "5000" {
		t.Errorf("after leaving: %v", g.Options)
	}
}

// TestOVNDenyOptionIPv6: an IPv6 deny entry not longer than an advertised local IPv6 subnet
// is kept out of ic-route-blacklist (OVN 23.03 would deny every IPv6 route at least that long,
// the subnet included) and reported unenforced; longer ones (join, transit, nodes) go in.
func TestOVNDenyOptionIPv6(t *testing.T) {
	in := baseInput()
	in.RefuseCIDRs = pfx("fd00:99::/64", "fd00:98::/120")
	in.NodeIPs = append(in.NodeIPs, netip.MustParseAddr("fd00:30::1:11"))
	d := For(in)
	deny := strings.Split(d.Options["ic-route-blacklist"], ",")
	for _, want := range []string{"fd00:100:64::/112", "fd00:a9fe:64::/112", "fd00:30::1:11/128", "fd00:98::/120"} {
		if !slices.Contains(deny, want) {
			t.Errorf("deny option %v lacks %s", deny, want)
		}
	}
	if slices.Contains(deny, "fd00:99::/64") || len(d.Unenforced) != 1 || d.Unenforced[0].String() != "fd00:99::/64" {
		t.Errorf("deny option %v, unenforced %v: want fd00:99::/64 unenforced only", deny, d.Unenforced)
	}
}

// TestForConflictLaterAZWithdraws: a remote prefix overlapping a local subnet is a conflict;
// of the two AZs the one that joined later withdraws its subnet (deny list) and says so, the
// older keeps advertising. The remote prefix is routed to only if it strictly contains the
// local subnet (the local one wins for its own addresses), never if it is inside it.
func TestForConflictLaterAZWithdraws(t *testing.T) {
	in := baseInput()
	in.LocalCIDRs = append(in.LocalCIDRs, netip.MustParsePrefix("10.30.5.0/24"))
	in.Remote["az0"] = pfx("10.30.0.0/16")
	in.Declared["az0"] = pfx("10.30.0.0/16")
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name      string
		joined    map[string]time.Time
		withdrawn bool
	}{
		{"az0 joined first", map[string]time.Time{"az0": t0, "az1": t0.Add(time.Minute)}, true},
		{"az1 joined first", map[string]time.Time{"az0": t0.Add(time.Minute), "az1": t0}, false},
		{"no record of az0 yet", map[string]time.Time{"az1": t0}, false},
	} {
		in.Joined = c.joined
		d := For(in)
		deny := strings.Split(d.Options["ic-route-blacklist"], ",")
		if len(d.Conflicts) != 1 || d.Conflicts[0].Withdrawn != c.withdrawn || slices.Contains(deny, "10.30.5.0/24") != c.withdrawn {
			t.Errorf("%s: conflicts %v, deny %v; want withdrawn=%t", c.name, d.Conflicts, deny, c.withdrawn)
		}
		var routed bool
		for _, p := range d.Shard.Policies {
			routed = routed || strings.Contains(p.Match, "10.30.0.0/16")
		}
		if !routed {
			t.Errorf("%s: no route to 10.30.0.0/16, which contains the local subnet", c.name)
		}
	}
	in.Remote["az0"] = pfx("10.30.5.128/25")
	in.Joined = nil
	for _, p := range For(in).Shard.Policies {
		if strings.Contains(p.Match, "10.30.5.128/25") {
			t.Errorf("routes to a remote prefix inside a local subnet: %+v", p)
		}
	}
	// The older AZ learns of the withdrawn subnet from the declaration alone.
	in.Remote["az0"], in.LocalCIDRs = nil, pfx("10.30.0.0/16")
	in.WithdrawnBy = map[string][]netip.Prefix{"az0": pfx("10.30.5.0/24")}
	if d := For(in); len(d.Conflicts) != 1 || d.Conflicts[0].Withdrawn || d.Conflicts[0].AZ != "az0" {
		t.Errorf("declared withdrawal: conflicts %v", d.Conflicts)
	}
}

// TestRecordJoin: the first claim creates IC_NB_Global; a second AZ adds its own; recording
// again keeps the first time; forgetting removes only that AZ.
func TestRecordJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := icnb.DatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ovn.ConnectICNB(ctx, ovn.Config{Endpoints: []string{ovntest.Serve(t, ovntest.SocketPath(t), db)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t0 := time.Unix(1000, 0).UTC()
	settle := func(want int) map[string]time.Time {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if got, err := claimJoin(ctx, c, "az1", "uid-1", t0.Add(time.Hour)); err == nil && len(got) == want {
				return got
			}
		}
		t.Fatalf("join records never reached %d", want)
		return nil
	}
	if _, err := claimJoin(ctx, c, "az1", "uid-1", t0); err != nil {
		t.Fatal(err)
	}
	settle(1)
	if _, err := claimJoin(ctx, c, "az2", "uid-2", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := settle(2)
	if !got["az1"].Equal(t0) || !got["az2"].Equal(t0.Add(time.Minute)) {
		t.Errorf("join times %v", got)
	}
	if err := renameJoin(ctx, c, "az2", "az2b", "uid-2"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, _ = claimJoin(ctx, c, "az1", "uid-1", t0.Add(time.Hour))
		if _, old := got["az2"]; !old && got["az2b"].Equal(t0.Add(time.Minute)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("az2 renamed az2b: join times %v, want az2b with az2's time and no az2", got)
		}
	}
	if err := forgetJoin(ctx, c, "az2b", "uid-2"); err != nil {
		t.Fatal(err)
	}
	if got := settle(1); !got["az1"].Equal(t0) {
		t.Errorf("after az2b left: %v", got)
	}
}

// TestRemoveAZ: leaving deletes the AZ with its gateways (their encaps go with them), routes and
// transit ports; another AZ's rows stay.
func TestRemoveAZ(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := serveICSB(ctx, t)
	var ops []ovsdb.Operation
	for i, az := range []string{"az1", "az2"} {
		a := &icsb.AvailabilityZone{UUID: ovn.NewNamedUUID(), Name: az}
		e := &icsb.Encap{UUID: ovn.NewNamedUUID(), GatewayName: az + "-n1", IP: fmt.Sprintf("172.30.%d.11", i+1), Type: icsb.EncapTypeGeneve}
		rows := []model.Model{a, e,
			&icsb.Gateway{Name: az + "-n1", AvailabilityZone: a.UUID, Encaps: []string{e.UUID}},
			&icsb.Route{AvailabilityZone: a.UUID, IPPrefix: "10.16.0.0/16", Nexthop: "169.254.100.1", TransitSwitch: "kovn-ts", Origin: icsb.RouteOriginConnected},
			&icsb.PortBinding{AvailabilityZone: a.UUID, LogicalPort: "kovn-ts-" + az, TransitSwitch: "kovn-ts", TunnelKey: i + 1}}
		for _, m := range rows {
			o, err := c.Create(m)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, o...)
		}
	}
	if _, err := ovn.Transact(ctx, c, ops); err != nil {
		t.Fatal(err)
	}
	count := func() (azs, gws, routes, pbs int) {
		var a []icsb.AvailabilityZone
		var g []icsb.Gateway
		var r []icsb.Route
		var p []icsb.PortBinding
		_, _, _, _ = c.List(ctx, &a), c.List(ctx, &g), c.List(ctx, &r), c.List(ctx, &p)
		return len(a), len(g), len(r), len(p)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if a, g, r, p := count(); a == 2 && g == 2 && r == 2 && p == 2 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("rows not cached: %d %d %d %d", a, g, r, p)
		}
	}
	if err := removeAZ(ctx, c, "az1"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if a, g, r, p := count(); a == 1 && g == 1 && r == 1 && p == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after removing az1: %d AZs, %d gateways, %d routes, %d port bindings; want 1 each", a, g, r, p)
		}
	}
}

func TestNodeChangeMatters(t *testing.T) {
	base := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "1"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.1.11"}}}}
	heartbeat := base.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	relabel := base.DeepCopy()
	relabel.Labels["gw"] = "true"
	marked := base.DeepCopy()
	marked.Annotations = map[string]string{"ovn.kovn.io/ic_gateway": "true"}
	readdressed := base.DeepCopy()
	readdressed.Status.Addresses[0].Address = "172.30.1.12"
	for name, tc := range map[string]struct {
		n    *corev1.Node
		want bool
	}{"heartbeat": {heartbeat, false}, "label": {relabel, true}, "annotation": {marked, true}, "address": {readdressed, true}} {
		if got := nodeChangeMatters(event.UpdateEvent{ObjectOld: &base, ObjectNew: tc.n}); got != tc.want {
			t.Errorf("%s: re-queue %v, want %v", name, got, tc.want)
		}
	}
}

// TestActiveGateways: every chassis holding one of the AZ's transit ports is active, once, in
// the AZ's gateway order; another AZ's ports and unbound ports do not count.
func TestActiveGateways(t *testing.T) {
	in := Input{AZ: "az1", Gateways: []string{"n1", "n2", "n3"}, TransitSwitches: []string{"kovn-ts", "kovn-ts1", "kovn-ts2"},
		SwitchPortKeys: keyedPorts("az1")}
	cs := clusterset{portGateway: map[string]string{"kovn-ts-az1": "n3", "kovn-ts1-az1": "n1", "kovn-ts2-az1": "n3",
		"kovn-ts-az2": "n2"}}
	if got := activeGateways(in, cs); !slices.Equal(got, []string{"n1", "n3"}) {
		t.Errorf("active %v, want [n1 n3]", got)
	}
	cs.portGateway = map[string]string{"kovn-ts-az1": ""}
	if got := activeGateways(in, cs); len(got) != 0 {
		t.Errorf("unbound: active %v", got)
	}
}

// A transit router port carries the tunnel key ovn-ic gave its peer switch port, on its own
// switch only, and nothing before ovn-ic keyed the peer.
func TestForRouterPortCarriesPeerKey(t *testing.T) {
	in := baseInput()
	in.TransitSwitches = []string{"kovn-ts", "kovn-ts1"}
	in.SwitchPortKeys = map[string]string{SwitchPortName("az1", "kovn-ts1"): "7"}
	d := For(in)
	byName := map[string]map[string]string{}
	for _, rp := range d.Shard.RouterPorts {
		byName[rp.Name] = rp.ExternalIDs
	}
	if len(byName) != 2 {
		t.Fatalf("router ports %v, want one per transit switch", d.Shard.RouterPorts)
	}
	if ids := byName[RouterPortName("az1", "kovn-ts1")]; ids[PeerTunnelKeyID] != "7" {
		t.Errorf("router port on kovn-ts1: external_ids %v, want %s=7", ids, PeerTunnelKeyID)
	}
	if ids := byName[RouterPortName("az1", "kovn-ts")]; len(ids) != 0 {
		t.Errorf("router port on kovn-ts (peer not keyed yet): external_ids %v, want none", ids)
	}
}

// TestForDeclaredRoutesOnly: routes are learned only inside the subnets their AZ declared;
// a default route, an undeclared AZ's routes and a prefix overlapping what an earlier AZ
// declared (inside it or covering it) are refused and never routed to; the refused prefix
// inside a learned route is denied to ovn-ic too (it would win by the longest match), the one
// covering learned routes is not (denying it would deny them). The AZ declares what it
// advertises.
func TestForDeclaredRoutesOnly(t *testing.T) {
	in := baseInput()
	t0 := time.Unix(1000, 0)
	in.Joined = map[string]time.Time{"az1": t0, "az2": t0.Add(time.Second), "az3": t0.Add(2 * time.Second), "az4": t0.Add(3 * time.Second)}
	in.RefuseCIDRs = pfx("10.16.128.0/17")
	in.LocalCIDRs = append(in.LocalCIDRs, pfx("10.16.128.0/24")...)
	in.Remote = map[string][]netip.Prefix{
		"az2": pfx("10.17.0.0/16", "0.0.0.0/0", "10.99.0.0/16", "fd00:10:17::/64", "10.16.7.0/24"),
		"az3": pfx("10.18.0.0/16", "0.0.0.0/1", "10.17.128.0/17"),
		"az4": pfx("10.19.0.0/16"),
	}
	in.Declared = map[string][]netip.Prefix{
		"az2": pfx("10.17.0.0/16", "fd00:10:17::/64"),
		"az3": pfx("10.18.0.0/16", "0.0.0.0/1", "10.17.128.0/17"),
	}
	d := For(in)
	var refused []string
	for _, r := range d.Refused {
		refused = append(refused, r.String())
	}
	want := []string{
		"0.0.0.0/0 from az2 (a default route)",
		"0.0.0.0/1 from az3 (overlaps az2's declared 10.17.0.0/16, which joined earlier)",
		"10.16.7.0/24 from az2 (outside its declared subnets [10.17.0.0/16 fd00:10:17::/64])",
		"10.17.128.0/17 from az3 (overlaps az2's declared 10.17.0.0/16, which joined earlier)",
		"10.19.0.0/16 from az4 (its AZ declared no subnets)",
		"10.99.0.0/16 from az2 (outside its declared subnets [10.17.0.0/16 fd00:10:17::/64])",
	}
	if !slices.Equal(refused, want) {
		t.Errorf("refused:\n%s\nwant:\n%s", strings.Join(refused, "\n"), strings.Join(want, "\n"))
	}
	learned := fmt.Sprint(d.Learned)
	if learned != "map[az2:[10.17.0.0/16 fd00:10:17::/64] az3:[10.18.0.0/16]]" {
		t.Errorf("learned %s", learned)
	}
	for _, p := range d.Shard.Policies {
		for _, r := range d.Refused {
			if strings.HasSuffix(p.Match, " "+r.Prefix.String()) {
				t.Errorf("refused %s is routed to: %+v", r, p)
			}
		}
	}
	deny := strings.Split(d.Options["ic-route-blacklist"], ",")
	if !slices.Contains(deny, "10.17.128.0/17") || !slices.Contains(deny, "10.16.7.0/24") || slices.Contains(deny, "0.0.0.0/1") || slices.Contains(deny, "0.0.0.0/0") {
		t.Errorf("blacklist %v: want 10.17.128.0/17 (inside az2's route) and 10.16.7.0/24 (inside a local subnet), not the covering 0.0.0.0/1 or 0.0.0.0/0", deny)
	}
	if got := fmt.Sprint(d.Declare); got != "[10.16.0.0/16 fd00:10:16::/64]" {
		t.Errorf("declared %s, want the advertised local subnets (10.16.128.0/24 is refused)", got)
	}
}
