package nbsync

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/pkg/ovn/ovntest"
)

func connect(t *testing.T) client.Client {
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

func input(pods ...topology.PodIn) topology.Input {
	return topology.Input{
		Vpcs: []topology.VpcIn{{Name: "ovn-cluster"}},
		Subnets: []topology.SubnetIn{
			{Name: "ovn-default", Vpc: "ovn-cluster", Switch: "ovn-default", CIDRs: []netip.Prefix{p("10.16.0.0/16")}, Gateways: []netip.Addr{a("10.16.0.1")}},
			{Name: "join", Vpc: "ovn-cluster", Switch: "join", CIDRs: []netip.Prefix{p("100.64.0.0/16")}, Gateways: []netip.Addr{a("100.64.0.1")}},
		},
		Nodes: []topology.NodeIn{
			{Name: "n1", Ready: true, NodeIPs: []netip.Addr{a("172.30.1.11")}, JoinIPs: []netip.Addr{a("100.64.0.2")}, JoinMAC: "0a:58:64:40:00:02"},
			{Name: "n2", Ready: true, NodeIPs: []netip.Addr{a("172.30.1.12")}, JoinIPs: []netip.Addr{a("100.64.0.3")}, JoinMAC: "0a:58:64:40:00:03"},
		},
		Pods:       pods,
		JoinSubnet: "join",
	}
}

func pod(name, node, ip string) topology.PodIn {
	return topology.PodIn{Namespace: "default", Name: name, Node: node, Subnet: "ovn-default", IPs: []netip.Addr{a(ip)}, MAC: "0a:58:0a:10:00:05"}
}

func apply(t *testing.T, c client.Client, in topology.Input) int {
	t.Helper()
	n, err := Apply(context.Background(), c, topology.For(in))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func list[T any](t *testing.T, c client.Client) []T {
	t.Helper()
	var out []T
	if err := c.List(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitCache waits until the client's cache shows n rows of T (the monitor is asynchronous).
func waitCache[T any](t *testing.T, c client.Client, n int) []T {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows := list[T](t, c)
		if len(rows) == n || time.Now().After(deadline) {
			if len(rows) != n {
				t.Fatalf("%T: %d rows, want %d: %+v", rows, len(rows), n, rows)
			}
			return rows
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestApplyCreatesThenNoOps(t *testing.T) {
	c := connect(t)
	if n := apply(t, c, input(pod("a", "n1", "10.16.0.5"))); n == 0 {
		t.Fatal("first apply sent no operations")
	}
	// ovn-default: router port + pod; join: router port + 2 nodes
	waitCache[nb.LogicalSwitchPort](t, c, 5)
	waitCache[nb.LogicalRouterPort](t, c, 2)
	waitCache[nb.PortGroup](t, c, 2)
	pols := waitCache[nb.LogicalRouterPolicy](t, c, 2+2+2) // allow x2, node reroute x2, per-node gw x2
	for _, pl := range pols {
		if pl.Priority == topology.PriorityDistributedGW && pl.Match == "ip4.src == $kovn_node_n1_ip4" && pl.Nexthops[0] != "100.64.0.2" {
			t.Errorf("n1 gateway policy nexthop %v", pl.Nexthops)
		}
	}
	if n := apply(t, c, input(pod("a", "n1", "10.16.0.5"))); n != 0 {
		t.Fatalf("second apply of the same state sent %d operations, want 0", n)
	}
}

func TestApplyRemovesPodKeepsForeignRows(t *testing.T) {
	c := connect(t)
	apply(t, c, input(pod("a", "n1", "10.16.0.5"), pod("b", "n2", "10.16.0.6")))
	waitCache[nb.LogicalSwitchPort](t, c, 6)
	// another tool's port on our switch must survive our syncs
	ls := waitCache[nb.LogicalSwitch](t, c, 2)
	var def nb.LogicalSwitch
	for _, s := range ls {
		if s.Name == "ovn-default" {
			def = s
		}
	}
	foreign := nb.LogicalSwitchPort{UUID: ovn.NewNamedUUID(), Name: "admin-port"}
	ops, _ := c.Create(&foreign)
	mops, _ := c.Where(&def).Mutate(&def, modelMutationInsertPort(&def, foreign.UUID))
	if _, err := ovn.Transact(context.Background(), c, append(ops, mops...)); err != nil {
		t.Fatal(err)
	}
	waitCache[nb.LogicalSwitchPort](t, c, 7)

	apply(t, c, input(pod("a", "n1", "10.16.0.5")))
	lsps := waitCache[nb.LogicalSwitchPort](t, c, 6)
	for _, l := range lsps {
		if l.Name == "b.default" {
			t.Fatal("pod b's port survived its removal")
		}
	}
	pgs := list[nb.PortGroup](t, c)
	for _, pg := range pgs {
		if pg.Name == "kovn_node_n2" && len(pg.Ports) != 0 {
			t.Errorf("n2 port group still has %d ports", len(pg.Ports))
		}
	}
}

func TestFrozenSwitchIsKept(t *testing.T) {
	c := connect(t)
	apply(t, c, input())
	waitCache[nb.LogicalSwitch](t, c, 2)
	in := input()
	in.Subnets = in.Subnets[1:] // ovn-default became invalid...
	in.InvalidSubnets = []string{"ovn-default"}
	apply(t, c, in)
	time.Sleep(100 * time.Millisecond)
	if n := len(list[nb.LogicalSwitch](t, c)); n != 2 {
		t.Fatalf("frozen subnet's switch was deleted: %d switches", n)
	}
	in.InvalidSubnets = nil // ...and is now deleted
	apply(t, c, in)
	waitCache[nb.LogicalSwitch](t, c, 1)
}

func TestCentralizedGatewayFailover(t *testing.T) {
	in := input()
	in.Subnets = append(in.Subnets, topology.SubnetIn{Name: "central", Vpc: "ovn-cluster", Switch: "central",
		CIDRs: []netip.Prefix{p("10.20.0.0/24")}, Gateways: []netip.Addr{a("10.20.0.1")}, Centralized: true, GatewayNodes: []string{"n2", "n1"}})
	hop := func(in topology.Input) string {
		for _, r := range topology.For(in).Routers {
			for _, pl := range r.Policies {
				if pl.Priority == topology.PriorityCentralGateway {
					return pl.Nexthops[0]
				}
			}
		}
		return ""
	}
	if got := hop(in); got != "100.64.0.3" {
		t.Fatalf("active gateway hop %q, want n2's 100.64.0.3", got)
	}
	in.Nodes[1].Ready = false
	if got := hop(in); got != "100.64.0.2" {
		t.Fatalf("after n2 went NotReady hop %q, want n1's 100.64.0.2", got)
	}
	in.Nodes[0].Ready = false
	if got := hop(in); got != "" {
		t.Fatalf("no gateway left but policy to %q", got)
	}
}
