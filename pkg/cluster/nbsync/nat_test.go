package nbsync

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// An external underlay subnet gives the default VPC's router a distributed gateway port; a
// FloatingIP's shard puts a dnat_and_snat per family on it and sends the pod's traffic there.
// A changed pod address replaces the NAT row; the empty shard leaves nothing behind.
func TestFloatingIPOnExternalGatewayPort(t *testing.T) {
	c := connect(t)
	base(t, c)
	ext := topology.SubnetIn{Name: "ext", Vpc: "ovn-cluster", Switch: "ext", CIDRs: []netip.Prefix{p("172.28.100.0/24"), p("fd00:28:100::/64")},
		Gateways: []netip.Addr{a("172.28.100.1"), a("fd00:28:100::1")},
		Underlay: &topology.UnderlayIn{Provider: "phys", VlanID: 100,
			External: &topology.ExternalGatewayIn{Addrs: []netip.Addr{a("172.28.100.254"), a("fd00:28:100::254")}, Nodes: []string{"n1", "n2"}}}}
	fip := topology.FloatingIPIn{Name: "web", Router: "ovn-cluster", GatewayPort: topology.RouterPortName("ovn-cluster", "ext"),
		Nexthops: ext.Gateways, Pairs: []topology.FloatingPair{{External: a("172.28.100.200"), Logical: a("10.16.0.5")},
			{External: a("fd00:28:100::200"), Logical: a("fd00:10:16::5")}}}

	// Before the external network exists, the FloatingIP waits for its port.
	_, err := Apply(context.Background(), c, topology.ForFloatingIP(fip))
	if !errors.Is(err, ErrParentMissing) {
		t.Fatalf("floating IP before its gateway port: %v, want ErrParentMissing", err)
	}
	apply(t, c, topology.ForSubnet(ext, &join, nil))
	lrp := named(t, c, fip.GatewayPort, func(r nb.LogicalRouterPort) string { return r.Name })
	if !slices.Equal(lrp.Networks, []string{"172.28.100.254/24", "fd00:28:100::254/64"}) || len(lrp.GatewayChassis) != 2 {
		t.Fatalf("external gateway port %+v", lrp)
	}
	if ops := apply(t, c, topology.ForFloatingIP(fip)); ops == 0 {
		t.Fatal("floating IP: nothing written")
	}
	nats := list[nb.NAT](t, c)
	if len(nats) != 2 {
		t.Fatalf("NAT rows %+v, want one per family", nats)
	}
	lr := named(t, c, "ovn-cluster", func(r nb.LogicalRouter) string { return r.Name })
	for _, n := range nats {
		if n.Type != nb.NATTypeDNATAndSNAT || n.GatewayPort == nil || *n.GatewayPort != lrp.UUID || !slices.Contains(lr.Nat, n.UUID) {
			t.Fatalf("NAT %+v (router's nat %v), want dnat_and_snat on %s", n, lr.Nat, lrp.UUID)
		}
	}
	var hops []string
	for _, pl := range list[nb.LogicalRouterPolicy](t, c) {
		if pl.Priority == topology.PriorityFloatingIP {
			hops = append(hops, pl.Match+" -> "+pl.Nexthops[0])
		}
	}
	slices.Sort(hops)
	if !slices.Equal(hops, []string{"ip4.src == 10.16.0.5 -> 172.28.100.1", "ip6.src == fd00:10:16::5 -> fd00:28:100::1"}) {
		t.Fatalf("floating IP policies %v", hops)
	}
	if ops := apply(t, c, topology.ForFloatingIP(fip)); ops != 0 {
		t.Fatalf("unchanged floating IP: %d operations", ops)
	}
	// The pod's node is on the external network: the same rows, distributed in place.
	fip.PodPort = "web-0.default"
	if ops := apply(t, c, topology.ForFloatingIP(fip)); ops != 2 {
		t.Fatalf("distributing: %d operations, want an update per row", ops)
	}
	for _, n := range list[nb.NAT](t, c) {
		if n.LogicalPort == nil || *n.LogicalPort != "web-0.default" || n.ExternalMAC == nil || *n.ExternalMAC != topology.FloatingIPMAC("web") {
			t.Fatalf("distributed NAT %+v", n)
		}
	}
	fip.PodPort = ""
	apply(t, c, topology.ForFloatingIP(fip))
	for _, n := range list[nb.NAT](t, c) {
		if n.LogicalPort != nil || n.ExternalMAC != nil {
			t.Fatalf("NAT still distributed: %+v", n)
		}
	}
	// The pod came back with another IPv4 address: one row replaced, the IPv6 row untouched.
	fip.Pairs[0].Logical = a("10.16.0.9")
	apply(t, c, topology.ForFloatingIP(fip))
	var logical []string
	for _, n := range list[nb.NAT](t, c) {
		logical = append(logical, n.LogicalIP)
	}
	slices.Sort(logical)
	if !slices.Equal(logical, []string{"10.16.0.9", "fd00:10:16::5"}) {
		t.Fatalf("NAT logical addresses %v after the pod moved", logical)
	}
	// The physical router's MAC, given: a static binding per gateway on the port, gone with
	// the external gateway.
	ext.Underlay.External.GatewayMAC = "4a:39:0c:13:ca:90"
	apply(t, c, topology.ForSubnet(ext, &join, nil))
	var bound []string
	for _, b := range list[nb.StaticMACBinding](t, c) {
		bound = append(bound, b.LogicalPort+" "+b.IP+" "+b.MAC)
	}
	slices.Sort(bound)
	if !slices.Equal(bound, []string{"ovn-cluster-ext 172.28.100.1 4a:39:0c:13:ca:90", "ovn-cluster-ext fd00:28:100::1 4a:39:0c:13:ca:90"}) {
		t.Fatalf("static MAC bindings %v", bound)
	}
	if ops := apply(t, c, topology.ForSubnet(ext, &join, nil)); ops != 0 {
		t.Fatalf("unchanged external gateway: %d operations", ops)
	}
	ext.Underlay.External = nil
	apply(t, c, topology.ForSubnet(ext, &join, nil))
	if n := len(list[nb.StaticMACBinding](t, c)); n != 0 {
		t.Fatalf("%d static MAC bindings left without the external gateway", n)
	}
	ext.Underlay.External = &topology.ExternalGatewayIn{Addrs: []netip.Addr{a("172.28.100.254")}, Nodes: []string{"n1"}}
	apply(t, c, topology.ForSubnet(ext, &join, nil))

	apply(t, c, topology.Shard{OwnerType: topology.OwnerFloatingIP, Owner: "web"})
	if n := len(list[nb.NAT](t, c)); n != 0 {
		t.Fatalf("%d NAT rows left after the FloatingIP went", n)
	}
	if lr := named(t, c, "ovn-cluster", func(r nb.LogicalRouter) string { return r.Name }); len(lr.Nat) != 0 {
		t.Fatalf("router still references %v", lr.Nat)
	}
}
