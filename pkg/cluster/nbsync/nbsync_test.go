package nbsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

// connect serves a northbound database as ovn-northd leaves it (with its NB_Global row).
func connect(t testing.TB) client.Client {
	t.Helper()
	c := connectBare(t)
	ovntest.CreateNBGlobal(t, c)
	return c
}

// connectBare serves an empty northbound database, as before northd first connects.
func connectBare(t testing.TB) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovn.ConnectNB(ctx, ovn.Config{Endpoints: []string{ovntest.ServeNB(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func a(s string) netip.Addr   { return netip.MustParseAddr(s) }

var (
	join = topology.SubnetIn{Name: "join", Vpc: "ovn-cluster", Switch: "join", CIDRs: []netip.Prefix{p("100.64.0.0/16")},
		Gateways: []netip.Addr{a("100.64.0.1")}}
	def = topology.SubnetIn{Name: "ovn-default", Vpc: "ovn-cluster", Switch: "ovn-default", CIDRs: []netip.Prefix{p("10.16.0.0/16")},
		Gateways: []netip.Addr{a("10.16.0.1")}, ExcludeIPs: []string{"10.16.0.2"}}
	n1 = topology.NodeIn{Name: "n1", Ready: true, NodeIPs: []netip.Addr{a("172.30.1.11")}, JoinIPs: []netip.Addr{a("100.64.0.2")}, JoinMAC: "0a:58:64:40:00:02"}
	n2 = topology.NodeIn{Name: "n2", Ready: true, NodeIPs: []netip.Addr{a("172.30.1.12")}, JoinIPs: []netip.Addr{a("100.64.0.3")}, JoinMAC: "0a:58:64:40:00:03"}
)

func pod(name, node, ip string) topology.PodIn {
	return topology.PodIn{Namespace: "default", Name: name, Node: node, Switch: "ovn-default", IPs: []netip.Addr{a(ip)}, MAC: "0a:58:0a:10:00:05"}
}

func apply(t testing.TB, c client.Client, sh topology.Shard) int {
	t.Helper()
	n, err := Apply(context.Background(), c, sh)
	if err != nil {
		t.Fatalf("apply %s/%s: %v", sh.OwnerType, sh.Owner, err)
	}
	return n
}

// base applies the VPC, the two subnets and both nodes.
func base(t testing.TB, c client.Client) {
	t.Helper()
	apply(t, c, topology.ForVpc(topology.VpcIn{Name: "ovn-cluster"}, &join))
	apply(t, c, topology.ForSubnet(join, &join, nil))
	apply(t, c, topology.ForSubnet(def, &join, nil))
	apply(t, c, topology.ForNode(n1, &join))
	apply(t, c, topology.ForNode(n2, &join))
}

func list[T any](t *testing.T, c client.Client) []T {
	t.Helper()
	var out []T
	if err := c.List(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func named[T any](t *testing.T, c client.Client, name string, nameOf func(T) string) T {
	t.Helper()
	for _, r := range list[T](t, c) {
		if nameOf(r) == name {
			return r
		}
	}
	t.Fatalf("no %T named %q", *new(T), name)
	return *new(T)
}

func lsNamed(t *testing.T, c client.Client, n string) nb.LogicalSwitch {
	return named(t, c, n, func(r nb.LogicalSwitch) string { return r.Name })
}
func pgNamed(t *testing.T, c client.Client, n string) nb.PortGroup {
	return named(t, c, n, func(r nb.PortGroup) string { return r.Name })
}
func lrNamed(t *testing.T, c client.Client, n string) nb.LogicalRouter {
	return named(t, c, n, func(r nb.LogicalRouter) string { return r.Name })
}

func TestShardsCreateThenNoOp(t *testing.T) {
	c := connect(t)
	base(t, c)
	if n := apply(t, c, topology.ForPod(pod("a", "n1", "10.16.0.5"))); n == 0 {
		t.Fatal("first apply of a pod sent no operations")
	}
	lr := lrNamed(t, c, "ovn-cluster")
	// 2 allow, 2 nodes' reroutes, the join subnet's 2 database guards (its one family, and
	// everywhere else).
	if len(lr.Ports) != 2 || len(lr.StaticRoutes) != 1 || len(lr.Policies) != 2+2+2+2 {
		t.Fatalf("router: %d ports, %d routes, %d policies; want 2, 1, 8", len(lr.Ports), len(lr.StaticRoutes), len(lr.Policies))
	}
	if ls := lsNamed(t, c, "ovn-default"); len(ls.Ports) != 2 || ls.OtherConfig["exclude_ips"] != "10.16.0.2" {
		t.Fatalf("ovn-default: %d ports, other_config %v", len(ls.Ports), ls.OtherConfig)
	}
	if ls := lsNamed(t, c, "join"); len(ls.Ports) != 4 {
		t.Fatalf("join: %d ports, want the cluster and health routers' ports + 2 nodes", len(ls.Ports))
	}
	if pg := pgNamed(t, c, "kovn_node_n1"); len(pg.Ports) != 1 {
		t.Fatalf("n1 port group has %d ports, want the pod", len(pg.Ports))
	}
	for _, sh := range []topology.Shard{topology.ForVpc(topology.VpcIn{Name: "ovn-cluster"}, &join),
		topology.ForSubnet(def, &join, nil), topology.ForNode(n1, &join), topology.ForPod(pod("a", "n1", "10.16.0.5"))} {
		if n := apply(t, c, sh); n != 0 {
			t.Errorf("re-applying %s/%s sent %d operations, want 0", sh.OwnerType, sh.Owner, n)
		}
	}
}

func TestPodMovesNodeAndGoes(t *testing.T) {
	c := connect(t)
	base(t, c)
	apply(t, c, topology.ForPod(pod("a", "n1", "10.16.0.5")))
	apply(t, c, topology.ForPod(pod("a", "n2", "10.16.0.5"))) // recreated on n2 (StatefulSet)
	if pg := pgNamed(t, c, "kovn_node_n1"); len(pg.Ports) != 0 {
		t.Fatalf("n1 group still holds the pod after it moved: %v", pg.Ports)
	}
	if pg := pgNamed(t, c, "kovn_node_n2"); len(pg.Ports) != 1 {
		t.Fatalf("n2 group has %d ports, want the pod", len(pg.Ports))
	}
	apply(t, c, topology.Shard{OwnerType: topology.OwnerPod, Owner: "default/a"})
	if ls := lsNamed(t, c, "ovn-default"); len(ls.Ports) != 1 {
		t.Fatalf("ovn-default keeps %d ports after the pod went, want only the router port", len(ls.Ports))
	}
	// ovn-default's router port; the join switch's ports to the cluster and health routers; 2 nodes
	if n := len(list[nb.LogicalSwitchPort](t, c)); n != 1+2+2 {
		t.Fatalf("%d switch ports left, want 5", n)
	}
}

// A second writer's rows on the same tables and its entries in shared columns survive every
// topology apply, including the deletion of topology shards next to them.
func TestOtherWritersRowsSurvive(t *testing.T) {
	c := connect(t)
	base(t, c)
	ls := lsNamed(t, c, "ovn-default")
	lr := lrNamed(t, c, "ovn-cluster")
	foreignPort := nb.LogicalSwitchPort{UUID: "fp", Name: "localnet-x", Type: "localnet",
		ExternalIDs: map[string]string{ovn.OwnerTypeKey: "Subnet", ovn.OwnerKey: "ovn-default", ovn.WriterKey: "underlay"}}
	foreignPol := nb.LogicalRouterPolicy{UUID: "fpol", Priority: 100, Match: "ip4.src == 1.2.3.4", Action: "drop",
		ExternalIDs: map[string]string{ovn.OwnerTypeKey: "Node", ovn.OwnerKey: "n1", ovn.WriterKey: "interconnect"}}
	foreignLB := nb.LoadBalancerGroup{UUID: "flbg", Name: "services"}
	var ops []ovsdb.Operation
	for _, m := range []model.Model{&foreignPort, &foreignPol, &foreignLB} {
		o, err := c.Create(m)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	for _, mu := range []struct {
		m   model.Model
		mut model.Mutation
	}{
		{&ls, model.Mutation{Field: &ls.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{"fp"}}},
		{&ls, model.Mutation{Field: &ls.LoadBalancerGroup, Mutator: ovsdb.MutateOperationInsert, Value: []string{"flbg"}}},
		{&ls, model.Mutation{Field: &ls.OtherConfig, Mutator: ovsdb.MutateOperationInsert, Value: map[string]string{"mcast_snoop": "true"}}},
		{&lr, model.Mutation{Field: &lr.Policies, Mutator: ovsdb.MutateOperationInsert, Value: []string{"fpol"}}},
	} {
		o, err := c.Where(mu.m).Mutate(mu.m, mu.mut)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	if _, err := ovn.Transact(context.Background(), c, ops); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return len(lsNamed(t, c, "ovn-default").Ports) == 2 && len(lrNamed(t, c, "ovn-cluster").Policies) == 9
	})

	def2 := def
	def2.ExcludeIPs = nil // other_config: our exclude_ips goes, their mcast_snoop stays
	apply(t, c, topology.ForSubnet(def2, &join, nil))
	apply(t, c, topology.Shard{OwnerType: topology.OwnerNode, Owner: "n1"}) // node n1 deleted
	apply(t, c, topology.ForVpc(topology.VpcIn{Name: "ovn-cluster"}, &join))

	ls = lsNamed(t, c, "ovn-default")
	// Two groups: the Services' one (ours) and the foreign one.
	if len(ls.Ports) != 2 || len(ls.LoadBalancerGroup) != 2 || ls.OtherConfig["mcast_snoop"] != "true" {
		t.Fatalf("ovn-default lost another writer's state: ports %v, lb groups %v, other_config %v", ls.Ports, ls.LoadBalancerGroup, ls.OtherConfig)
	}
	if _, ok := ls.OtherConfig["exclude_ips"]; ok {
		t.Fatalf("exclude_ips kept after the spec dropped it: %v", ls.OtherConfig)
	}
	lr = lrNamed(t, c, "ovn-cluster")
	if len(lr.Policies) != 2+2+2+1 { // 2 allow, n2's 2, the 2 database guards, the foreign one
		t.Fatalf("router has %d policies after n1 went, want 7", len(lr.Policies))
	}
	found := false
	for _, pl := range list[nb.LogicalRouterPolicy](t, c) {
		found = found || pl.UUID == foreignPol.UUID || pl.Match == foreignPol.Match
	}
	if !found {
		t.Fatal("the interconnect writer's policy owned by Node n1 was deleted with topology's n1 shard")
	}
}

func waitFor(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMissingParentIsReported(t *testing.T) {
	c := connect(t)
	_, err := Apply(context.Background(), c, topology.ForPod(pod("a", "n1", "10.16.0.5")))
	if !errors.Is(err, ErrParentMissing) {
		t.Fatalf("pod before its switch: err %v, want ErrParentMissing", err)
	}
	if n := len(list[nb.LogicalSwitchPort](t, c)); n != 0 {
		t.Fatalf("%d ports created without a switch", n)
	}
	base(t, c)
	apply(t, c, topology.ForPod(pod("a", "n1", "10.16.0.5")))
}

func TestCentralizedGatewayPolicy(t *testing.T) {
	central := topology.SubnetIn{Name: "central", Vpc: "ovn-cluster", Switch: "central", CIDRs: []netip.Prefix{p("10.20.0.0/24")},
		Gateways: []netip.Addr{a("10.20.0.1")}, Centralized: true, GatewayNodes: []string{"n2", "n1"}}
	hop := func(nodes ...topology.NodeIn) string {
		m := map[string]topology.NodeIn{}
		for _, n := range nodes {
			m[n.Name] = n
		}
		for _, pl := range topology.ForSubnet(central, &join, m).Policies {
			if pl.Priority == topology.PriorityCentralGateway {
				return pl.Nexthops[0]
			}
		}
		return ""
	}
	down := n2
	down.Ready = false
	if got := hop(n1, n2); got != "100.64.0.3" {
		t.Fatalf("active gateway hop %q, want n2's", got)
	}
	if got := hop(n1, down); got != "100.64.0.2" {
		t.Fatalf("n2 NotReady: hop %q, want n1's", got)
	}
	c := connect(t)
	base(t, c)
	apply(t, c, topology.ForSubnet(central, &join, map[string]topology.NodeIn{"n1": n1, "n2": n2}))
	apply(t, c, topology.ForSubnet(central, &join, map[string]topology.NodeIn{"n1": n1, "n2": down}))
	var hops []string
	for _, pl := range list[nb.LogicalRouterPolicy](t, c) {
		if pl.Priority == topology.PriorityCentralGateway {
			hops = append(hops, pl.Nexthops...)
		}
	}
	if len(hops) != 1 || hops[0] != "100.64.0.2" {
		t.Fatalf("central gateway policies in NB: %v, want one to n1", hops)
	}
}

// A standby replica moves the egress from NB and SB alone: FollowGateway points the policy at
// the node OVN bound the health port to, with the join address the leader recorded, and
// touches nothing for a node that is not one of the subnet's gateways.
func TestFollowGateway(t *testing.T) {
	central := topology.SubnetIn{Name: "central", Vpc: "ovn-cluster", Switch: "central", CIDRs: []netip.Prefix{p("10.20.0.0/24")},
		Gateways: []netip.Addr{a("10.20.0.1")}, Centralized: true, GatewayNodes: []string{"n2", "n1"}}
	c := connect(t)
	base(t, c)
	nodes := map[string]topology.NodeIn{"n1": n1, "n2": n2}
	apply(t, c, topology.ForSubnet(central, &join, nodes))
	hops := func() []string {
		var out []string
		for _, pl := range list[nb.LogicalRouterPolicy](t, c) {
			if pl.Priority == topology.PriorityCentralGateway {
				out = append(out, pl.Nexthops...)
			}
		}
		return out
	}
	if got := hops(); !slices.Equal(got, []string{"100.64.0.3"}) {
		t.Fatalf("policy before failover: %v, want n2's", got)
	}
	for _, tc := range []struct {
		node string
		ops  int
		want string
	}{{"n1", 1, "100.64.0.2"}, {"n1", 0, "100.64.0.2"}, {"n9", 0, "100.64.0.2"}, {"n2", 1, "100.64.0.3"}} {
		ops, err := FollowGateway(context.Background(), c, "central", tc.node)
		if err != nil || ops != tc.ops {
			t.Fatalf("follow %s: %d ops, err %v; want %d", tc.node, ops, err, tc.ops)
		}
		if got := hops(); !slices.Equal(got, []string{tc.want}) {
			t.Fatalf("bound to %s: policy to %v, want %s", tc.node, got, tc.want)
		}
	}
	// The leader's reconcile with the same verdict (n1 holds the port) writes nothing more.
	m := map[string]topology.NodeIn{"n1": n1, "n2": n2}
	held := m["n1"]
	held.HoldsHealthPort = true
	m["n1"] = held
	if _, err := FollowGateway(context.Background(), c, "central", "n1"); err != nil {
		t.Fatal(err)
	}
	ops, missing, err := Plan(context.Background(), c, topology.ForSubnet(central, &join, m))
	if err != nil || len(missing) > 0 || len(ops) != 0 {
		t.Fatalf("leader after a standby's failover: %d ops %v, missing %v, err %v; want none", len(ops), ops, missing, err)
	}
}

// The cost of one pod event must not grow with the cluster: the transaction that adds a pod
// is the same size beside 5 other pods as beside 500, and touches shared columns only by
// mutation (a switch's or port group's whole port list is never rewritten).
func TestPodEventCostIndependentOfClusterSize(t *testing.T) {
	size := func(others int) int {
		c := connect(t)
		base(t, c)
		for i := 0; i < others; i++ {
			apply(t, c, topology.ForPod(pod(fmt.Sprintf("p%d", i), []string{"n1", "n2"}[i%2], fmt.Sprintf("10.16.%d.%d", 1+i/250, 1+i%250))))
		}
		ops, missing, err := Plan(context.Background(), c, topology.ForPod(pod("new", "n1", "10.16.200.1")))
		if err != nil || len(missing) > 0 {
			t.Fatalf("plan: %v, missing %v", err, missing)
		}
		for _, op := range ops {
			if op.Op == ovsdb.OperationUpdate && (op.Table == "Logical_Switch" || op.Table == "Port_Group") {
				t.Fatalf("%s is rewritten whole: %+v", op.Table, op)
			}
		}
		b, _ := json.Marshal(ops)
		return len(namedUUID.ReplaceAll(b, []byte(`"u"`))) // named UUIDs carry a process-wide counter
	}
	small, large := size(5), size(500)
	if small != large {
		t.Fatalf("adding a pod costs a %d-byte transaction beside 5 pods and %d bytes beside 500", small, large)
	}
}

var namedUUID = regexp.MustCompile(`"u[0-9]+"`)

func lrpNamed(t *testing.T, c client.Client, n string) nb.LogicalRouterPort {
	return named(t, c, n, func(r nb.LogicalRouterPort) string { return r.Name })
}

// TestRouterPortIPv6RAConfigs: a subnet's router port carries ipv6_ra_configs in NB exactly
// while the subnet has an IPv6 CIDR (created with it, added by an update, cleared when the
// IPv6 CIDR goes, restored on a row that lacks it while nothing else changed, as one written
// by an older kovn), and an unchanged port costs no operation.
func TestRouterPortIPv6RAConfigs(t *testing.T) {
	c := connect(t)
	base(t, c)
	ra := map[string]string{"address_mode": "dhcpv6_stateful", "send_periodic": "false"}
	dual := def
	dual.CIDRs = []netip.Prefix{p("10.16.0.0/16"), p("fd00:10:16::/64")}
	dual.Gateways = []netip.Addr{a("10.16.0.1"), a("fd00:10:16::1")}
	v6 := topology.SubnetIn{Name: "v6", Vpc: "ovn-cluster", Switch: "v6", CIDRs: []netip.Prefix{p("fd00:20::/64")},
		Gateways: []netip.Addr{a("fd00:20::1")}}
	apply(t, c, topology.ForSubnet(v6, &join, nil))
	if got := lrpNamed(t, c, "ovn-cluster-v6"); !sameMap(got.Ipv6RaConfigs, ra) {
		t.Errorf("IPv6-only subnet created: ipv6_ra_configs %v, want %v", got.Ipv6RaConfigs, ra)
	}
	if got := lrpNamed(t, c, "ovn-cluster-ovn-default"); len(got.Ipv6RaConfigs) != 0 {
		t.Errorf("IPv4-only subnet: ipv6_ra_configs %v, want none", got.Ipv6RaConfigs)
	}
	for _, step := range []struct {
		what string
		in   topology.SubnetIn
		want map[string]string
	}{
		{"IPv6 CIDR added", dual, ra},
		{"IPv6 CIDR removed", def, nil},
		{"IPv6 CIDR back", dual, ra},
	} {
		apply(t, c, topology.ForSubnet(step.in, &join, nil))
		got := lrpNamed(t, c, "ovn-cluster-ovn-default")
		if !sameMap(got.Ipv6RaConfigs, step.want) || len(got.Networks) != len(step.in.CIDRs) {
			t.Errorf("%s: networks %v, ipv6_ra_configs %v; want %d networks, %v", step.what, got.Networks, got.Ipv6RaConfigs,
				len(step.in.CIDRs), step.want)
		}
		if n := apply(t, c, topology.ForSubnet(step.in, &join, nil)); n != 0 {
			t.Errorf("%s: re-applying sent %d operations, want 0", step.what, n)
		}
	}
	lrp := lrpNamed(t, c, "ovn-cluster-ovn-default")
	lrp.Ipv6RaConfigs = map[string]string{}
	ops, err := c.Where(&lrp).Update(&lrp, &lrp.Ipv6RaConfigs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ovn.Transact(context.Background(), c, ops); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(lrpNamed(t, c, "ovn-cluster-ovn-default").Ipv6RaConfigs) == 0 })
	apply(t, c, topology.ForSubnet(dual, &join, nil))
	if got := lrpNamed(t, c, "ovn-cluster-ovn-default"); !sameMap(got.Ipv6RaConfigs, ra) {
		t.Errorf("row without ipv6_ra_configs, same networks: after apply %v, want %v", got.Ipv6RaConfigs, ra)
	}
}
