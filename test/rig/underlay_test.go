package rig

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestUnderlayAddressPlan(t *testing.T) {
	for _, tc := range []struct {
		family string
		want   map[string]string // helper -> its family-ordered result
	}{
		{Dual, map[string]string{
			"provider":  "[172.29.1.12 fd00:29::1:12]",
			"prt":       "[172.29.0.254 fd00:29::254]",
			"nets":      "[172.29.0.0/16 fd00:29::/64]",
			"routes":    "[172.28.0.0/16 fd00:28::/32]",
			"vlan100":   "[172.28.100.0/24 fd00:28:100::/64]",
			"gw200":     "[172.28.200.1 fd00:28:200::1]",
			"vlan30":    "[172.28.30.0/24 fd00:28:30::/64]",
			"gw30":      "[172.28.30.1 fd00:28:30::1]",
			"uext":      "[172.28.30.100 fd00:28:30::100]",
			"provider9": "[172.29.9.60 fd00:29::9:60]",
		}},
		{IPv4, map[string]string{"provider": "[172.29.1.12]", "prt": "[172.29.0.254]", "nets": "[172.29.0.0/16]",
			"routes": "[172.28.0.0/16]", "vlan100": "[172.28.100.0/24]", "gw200": "[172.28.200.1]",
			"vlan30": "[172.28.30.0/24]", "gw30": "[172.28.30.1]", "uext": "[172.28.30.100]", "provider9": "[172.29.9.60]"}},
		{IPv6, map[string]string{"provider": "[fd00:29::1:12]", "prt": "[fd00:29::254]", "nets": "[fd00:29::/64]",
			"routes": "[fd00:28::/32]", "vlan100": "[fd00:28:100::/64]", "gw200": "[fd00:28:200::1]",
			"vlan30": "[fd00:28:30::/64]", "gw30": "[fd00:28:30::1]", "uext": "[fd00:28:30::100]", "provider9": "[fd00:29::9:60]"}},
	} {
		c := Config{IPFamily: tc.family}
		got := map[string]string{
			"provider": fmt.Sprint(c.ProviderIPs(1, 2)), "prt": fmt.Sprint(c.PhysRouterIPs()),
			"nets": fmt.Sprint(c.ProviderNets()), "routes": fmt.Sprint(c.UnderlayRoutes()),
			"vlan100": fmt.Sprint(c.VlanCIDRs(100)), "gw200": fmt.Sprint(c.VlanGateways(200)),
			"vlan30": fmt.Sprint(c.VlanCIDRs(UnderlayHostVLAN)), "gw30": fmt.Sprint(c.VlanGateways(UnderlayHostVLAN)),
			"uext": fmt.Sprint(c.UnderlayHostIPs()), "provider9": fmt.Sprint(c.ProviderIPs(9, 50)),
		}
		for k, want := range tc.want {
			if got[k] != want {
				t.Errorf("%s %s: %s, want %s", tc.family, k, got[k], want)
			}
		}
	}
}

// The underlay's addresses sit where they are routed: nodes and router on the native VLAN's
// subnet, every VLAN inside the nodes' underlay route and off the fabric and the native VLAN.
func TestUnderlayPlanIsConsistent(t *testing.T) {
	c := Config{IPFamily: Dual}
	for i, nat := range c.ProviderNets() {
		if !nat.Contains(c.PhysRouterIPs()[i]) || !nat.Contains(c.ProviderIPs(9, 50)[i]) || nat.Overlaps(c.UnderlayRoutes()[i]) {
			t.Fatalf("native VLAN %s misses the router or a node, or overlaps the underlay route", nat)
		}
	}
	for _, v := range append(append([]int{}, UnderlayVLANs...), UnderlayHostVLAN) {
		for i, p := range c.VlanCIDRs(v) {
			if p != p.Masked() || !c.UnderlayRoutes()[i].Contains(p.Addr()) || p.Overlaps(fabricPrefix) || p.Overlaps(fabricPrefix6) {
				t.Fatalf("VLAN %d subnet %s unmasked, outside the underlay route or on the fabric", v, p)
			}
			if !p.Contains(c.VlanGateways(v)[i]) {
				t.Fatalf("VLAN %d gateway off its subnet", v)
			}
		}
	}
	for i, ip := range c.UnderlayHostIPs() {
		if !c.VlanCIDRs(UnderlayHostVLAN)[i].Contains(ip) {
			t.Fatalf("underlay host %s off VLAN %d", ip, UnderlayHostVLAN)
		}
	}
	cfg := Config{Prefix: "krtest"}
	if cfg.PhysRouterNS() != "krtest-prt" || cfg.UnderlayHostNS() != "krtest-uext" || FabricVlanPort(1, 2) != "v1n2" {
		t.Fatalf("names %s %s %s", cfg.PhysRouterNS(), cfg.UnderlayHostNS(), FabricVlanPort(1, 2))
	}
	if dev, port := physRouterPort(100); dev != "eth0.100" || port != "vprt100" {
		t.Fatalf("router's VLAN 100 port %s/%s", dev, port)
	}
	ports := map[string]string{}
	var names []string
	for _, p := range (Config{Clusters: 1, Nodes: 2}).vfabPorts() {
		names = append(names, p.name)
		ports[p.name] = strings.Join(p.vlan, " ")
	}
	if got := strings.Join(names, " "); got != "v1n1 v1n2 vprt vprt100 vprt200 vprt30 vuext" {
		t.Fatalf("switch ports %s", got)
	}
	for name, want := range map[string]string{"v1n2": "vlan_mode=native-untagged tag=1 trunks=1,100,200",
		"vprt": "vlan_mode=access tag=1", "vprt30": "vlan_mode=access tag=30", "vuext": "vlan_mode=access tag=30"} {
		if ports[name] != want {
			t.Errorf("port %s: %q, want %q", name, ports[name], want)
		}
	}
	if got := prefixAddr(netip.MustParseAddr("fd00:29::1:11"), providerNet6); got != "fd00:29::1:11/64" {
		t.Fatalf("prefixAddr %s", got)
	}
}
