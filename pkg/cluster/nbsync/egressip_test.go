package nbsync

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// An EgressIP's shard: an snat per selected pod address on the external gateway port (never
// distributed), one reroute policy per family listing the pods; a pod joining the selection
// costs one new row and a policy update, a pod leaving removes its row; the empty shard leaves
// nothing. A FloatingIP on the same router keeps its rows throughout.
func TestEgressIPOnExternalGatewayPort(t *testing.T) {
	c := connect(t)
	base(t, c)
	ext := topology.SubnetIn{Name: "ext", Vpc: "ovn-cluster", Switch: "ext", CIDRs: []netip.Prefix{p("172.28.100.0/24"), p("fd00:28:100::/64")},
		Gateways: []netip.Addr{a("172.28.100.1"), a("fd00:28:100::1")},
		Underlay: &topology.UnderlayIn{Provider: "phys", VlanID: 100,
			External: &topology.ExternalGatewayIn{Addrs: []netip.Addr{a("172.28.100.254"), a("fd00:28:100::254")}, Nodes: []string{"n1", "n2"}}}}
	apply(t, c, topology.ForSubnet(ext, &join, nil))
	gw := topology.RouterPortName("ovn-cluster", "ext")
	lrp := named(t, c, gw, func(r nb.LogicalRouterPort) string { return r.Name })
	lsp := named(t, c, topology.SwitchRouterPortName("ext", "ovn-cluster"), func(p nb.LogicalSwitchPort) string { return p.Name })
	if lsp.Options["nat-addresses"] != "router" {
		t.Fatalf("external network's router port options %v: want nat-addresses=router (announced after a move)", lsp.Options)
	}
	apply(t, c, topology.ForFloatingIP(topology.FloatingIPIn{Name: "web", Router: "ovn-cluster", GatewayPort: gw, Nexthops: ext.Gateways,
		Pairs: []topology.FloatingPair{{External: a("172.28.100.200"), Logical: a("10.16.0.5")}}}))

	eip := topology.EgressIPIn{Name: "out", Router: "ovn-cluster", GatewayPort: gw, Nexthops: ext.Gateways,
		Addresses: []netip.Addr{a("172.28.100.210"), a("fd00:28:100::210")},
		PodIPs:    []netip.Addr{a("10.16.0.7"), a("fd00:10:16::7"), a("10.16.0.3")}}
	apply(t, c, topology.ForEgressIP(eip))
	snats := func() []string {
		var out []string
		for _, n := range list[nb.NAT](t, c) {
			if n.Type != nb.NATTypeSNAT {
				continue
			}
			if n.GatewayPort == nil || *n.GatewayPort != lrp.UUID || n.LogicalPort != nil {
				t.Fatalf("snat %+v: want on the gateway port %s, not distributed", n, lrp.UUID)
			}
			out = append(out, n.LogicalIP+">"+n.ExternalIP)
		}
		slices.Sort(out)
		return out
	}
	policies := func() []string {
		var out []string
		for _, pl := range list[nb.LogicalRouterPolicy](t, c) {
			if pl.Priority == topology.PriorityEgressIP {
				out = append(out, pl.Match+" -> "+pl.Nexthops[0])
			}
		}
		slices.Sort(out)
		return out
	}
	if got := snats(); !slices.Equal(got, []string{"10.16.0.3>172.28.100.210", "10.16.0.7>172.28.100.210", "fd00:10:16::7>fd00:28:100::210"}) {
		t.Fatalf("snat rows %v", got)
	}
	if got := policies(); !slices.Equal(got, []string{"ip4.src == {10.16.0.3, 10.16.0.7} -> 172.28.100.1", "ip6.src == {fd00:10:16::7} -> fd00:28:100::1"}) {
		t.Fatalf("egress policies %v", got)
	}
	if ops := apply(t, c, topology.ForEgressIP(eip)); ops != 0 {
		t.Fatalf("unchanged EgressIP: %d operations", ops)
	}
	// 10.16.0.3 leaves the selection, 10.16.0.9 joins.
	eip.PodIPs = []netip.Addr{a("10.16.0.7"), a("fd00:10:16::7"), a("10.16.0.9")}
	apply(t, c, topology.ForEgressIP(eip))
	if got := snats(); !slices.Equal(got, []string{"10.16.0.7>172.28.100.210", "10.16.0.9>172.28.100.210", "fd00:10:16::7>fd00:28:100::210"}) {
		t.Fatalf("snat rows after the selection changed: %v", got)
	}
	if got := policies(); len(got) != 2 || got[0] != "ip4.src == {10.16.0.7, 10.16.0.9} -> 172.28.100.1" {
		t.Fatalf("egress policies after the selection changed: %v", got)
	}
	// No pod of a family: no policy of it.
	eip.PodIPs = []netip.Addr{a("10.16.0.7")}
	apply(t, c, topology.ForEgressIP(eip))
	if got := policies(); len(got) != 1 {
		t.Fatalf("egress policies with IPv4 pods only: %v", got)
	}
	apply(t, c, topology.Shard{OwnerType: topology.OwnerEgressIP, Owner: "out"})
	if got, n := snats(), len(list[nb.NAT](t, c)); len(got) != 0 || n != 1 {
		t.Fatalf("after the EgressIP went: snat %v, %d NAT rows (want the FloatingIP's only)", got, n)
	}
	if got := policies(); len(got) != 0 {
		t.Fatalf("egress policies left: %v", got)
	}
}
