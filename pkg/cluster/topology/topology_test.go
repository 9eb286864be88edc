package topology

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

var (
	joinIn = SubnetIn{Name: "join", Vpc: "ovn-cluster", Switch: "join",
		CIDRs: prefixes("100.64.0.0/16", "fd00:100:64::/112"), Gateways: addrs("100.64.0.1", "fd00:100:64::1")}
	defaultIn = SubnetIn{Name: "ovn-default", Vpc: "ovn-cluster", Switch: "ovn-default",
		CIDRs: prefixes("10.16.0.0/16", "fd00:10:16::/64"), Gateways: addrs("10.16.0.1", "fd00:10:16::1"),
		ExcludeIPs: []string{"10.16.0.2..10.16.0.9", "10.16.0.100"}}
	centralIn = SubnetIn{Name: "central", Vpc: "ovn-cluster", Switch: "central-ls", CIDRs: prefixes("10.20.0.0/24"),
		Gateways: addrs("10.20.0.1"), Centralized: true, GatewayNodes: []string{"gone", "n4", "n3", "n2", "n1"}}
	customIn = SubnetIn{Name: "custom", Vpc: "vpc2", Switch: "custom", CIDRs: prefixes("192.168.0.0/24"), Gateways: addrs("192.168.0.1")}
	nodesIn  = map[string]NodeIn{
		"n1": {Name: "n1", Ready: true, NodeIPs: addrs("172.18.0.2", "fc00::2"), JoinIPs: addrs("100.64.0.2", "fd00:100:64::2"), JoinMAC: "0a:58:64:40:00:02"},
		// IPv6 node address but no IPv6 join address: no IPv6 reroute.
		"n2": {Name: "n2", Ready: true, NodeIPs: addrs("172.18.0.3", "fc00::3"), JoinIPs: addrs("100.64.0.3"), JoinMAC: "0a:58:64:40:00:03"},
		"n3": {Name: "n3", Ready: false, NodeIPs: addrs("172.18.0.4"), JoinIPs: addrs("100.64.0.4"), JoinMAC: "0a:58:64:40:00:04"},
		"n4": {Name: "n4", Ready: true, NodeIPs: addrs("172.18.0.5")}, // join address not assigned yet
	}
)

func TestForSubnet(t *testing.T) {
	sh := ForSubnet(defaultIn, &joinIn, nil)
	if sh.OwnerType != OwnerSubnet || sh.Owner != "ovn-default" {
		t.Fatalf("owner %s/%s", sh.OwnerType, sh.Owner)
	}
	wantSwitch := Switch{Name: "ovn-default", OtherConfig: map[string]string{"subnet": "10.16.0.0/16",
		"ipv6_prefix": "fd00:10:16::", "exclude_ips": "10.16.0.2..10.16.0.9 10.16.0.100"}, LBGroups: []string{ClusterLBGroup}}
	if !reflect.DeepEqual(sh.Switches, []Switch{wantSwitch}) {
		t.Errorf("switch %+v, want %+v", sh.Switches, wantSwitch)
	}
	wantLRP := RouterPort{Router: "ovn-cluster", Name: "ovn-cluster-ovn-default", MAC: RouterMAC("ovn-cluster-ovn-default"),
		Networks:      []string{"10.16.0.1/16", "fd00:10:16::1/64"},
		IPv6RAConfigs: map[string]string{"address_mode": "dhcpv6_stateful", "send_periodic": "false"}}
	if !reflect.DeepEqual(sh.RouterPorts, []RouterPort{wantLRP}) {
		t.Errorf("router port %+v, want %+v", sh.RouterPorts, wantLRP)
	}
	wantLSP := SwitchPort{Switch: "ovn-default", Name: "ovn-default-ovn-cluster", Type: "router", Addresses: []string{"router"},
		Options: map[string]string{"router-port": "ovn-cluster-ovn-default"}}
	if !reflect.DeepEqual(sh.SwitchPorts, []SwitchPort{wantLSP}) {
		t.Errorf("switch port %+v, want %+v", sh.SwitchPorts, wantLSP)
	}
	wantPol := []Policy{
		{Router: "ovn-cluster", Priority: PriorityAllowCluster, Action: "allow", Match: "ip4.dst == 10.16.0.0/16"},
		{Router: "ovn-cluster", Priority: PriorityAllowCluster, Action: "allow", Match: "ip6.dst == fd00:10:16::/64"},
	}
	if !reflect.DeepEqual(sh.Policies, wantPol) {
		t.Errorf("policies %+v, want %+v", sh.Policies, wantPol)
	}
}

func TestForSubnetCentralizedPicksFirstReadyGateway(t *testing.T) {
	sh := ForSubnet(centralIn, &joinIn, nodesIn) // gone: missing, n4: no join IP, n3: NotReady
	var got []Policy
	for _, p := range sh.Policies {
		if p.Priority == PriorityCentralGateway {
			got = append(got, p)
		}
	}
	// Every gateway node with a join address is listed, in the subnet's order, for failover
	// by any replica (NotReady n3 too: OVN's binding outranks Node readiness).
	want := []Policy{{Router: "ovn-cluster", Priority: PriorityCentralGateway, Action: "reroute", Match: "ip4.src == 10.20.0.0/24", Nexthops: []string{"100.64.0.3"},
		ExternalIDs: map[string]string{GatewayHopsKey: "n3=100.64.0.4,n2=100.64.0.3,n1=100.64.0.2"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("central gateway policies %+v, want %+v", got, want)
	}
	none := map[string]NodeIn{"n3": nodesIn["n3"]}
	for _, p := range ForSubnet(centralIn, &joinIn, none).Policies {
		if p.Priority == PriorityCentralGateway {
			t.Fatalf("no eligible gateway but a reroute %+v", p)
		}
	}
}

// TestForSubnetCentralizedFollowsGatewayHealth: the node OVN bound the health port to is the
// gateway even when it is NotReady (its data path is what counts) and even when a node before
// it in the list is Ready; a bound node without a join address is passed over.
func TestForSubnetCentralizedFollowsGatewayHealth(t *testing.T) {
	nodes := map[string]NodeIn{}
	for k, v := range nodesIn {
		nodes[k] = v
	}
	n3 := nodes["n3"]
	n3.HoldsHealthPort = true // NotReady, after Ready n2 in the list
	nodes["n3"] = n3
	hop := func(nodes map[string]NodeIn) []string {
		for _, p := range ForSubnet(centralIn, &joinIn, nodes).Policies {
			if p.Priority == PriorityCentralGateway {
				return p.Nexthops
			}
		}
		return nil
	}
	if got := hop(nodes); !reflect.DeepEqual(got, []string{"100.64.0.4"}) {
		t.Errorf("bound to n3: reroute to %v, want n3's 100.64.0.4", got)
	}
	n3.HoldsHealthPort, n3.JoinIPs = false, nil
	nodes["n3"] = n3
	n4 := nodes["n4"]
	n4.HoldsHealthPort = true // bound but no join address: readiness decides (n2)
	nodes["n4"] = n4
	if got := hop(nodes); !reflect.DeepEqual(got, []string{"100.64.0.3"}) {
		t.Errorf("bound to n4 without a join address: reroute to %v, want n2's 100.64.0.3", got)
	}
}

// TestForSubnetHealthPort: a centralized subnet in the join VPC gets a gateway port on the
// health router whose chassis are its gateway nodes, the first highest, with an address of its
// own; the join subnet's shard owns the health router and its link to the join switch; other
// subnets have neither.
func TestForSubnetHealthPort(t *testing.T) {
	healthPort := func(sh Shard, name string) *RouterPort {
		for i := range sh.RouterPorts {
			if sh.RouterPorts[i].Name == name {
				return &sh.RouterPorts[i]
			}
		}
		return nil
	}
	sh := ForSubnet(centralIn, &joinIn, nodesIn)
	hp := healthPort(sh, HealthPortName("central"))
	if len(sh.Routers) > 0 || hp == nil || hp.Router != HealthRouter {
		t.Fatalf("routers %+v; want a health port on %s: %+v", sh.Routers, HealthRouter, sh.RouterPorts)
	}
	want := []GatewayChassis{{"gone", 32767}, {"n4", 32766}, {"n3", 32765}, {"n2", 32764}, {"n1", 32763}}
	if !reflect.DeepEqual(hp.GatewayChassis, want) {
		t.Errorf("gateway chassis %+v, want %+v", hp.GatewayChassis, want)
	}
	other := centralIn
	other.Name = "central2"
	if n := healthPort(ForSubnet(other, &joinIn, nodesIn), HealthPortName("central2")); n == nil || reflect.DeepEqual(n.Networks, hp.Networks) {
		t.Errorf("two health ports share networks %v", hp.Networks)
	}
	if s, ok := SubnetOfHealthPort(hp.Name); !ok || s != "central" {
		t.Errorf("SubnetOfHealthPort(%q) = %q, %v", hp.Name, s, ok)
	}
	js := ForSubnet(joinIn, &joinIn, nil)
	link := healthPort(js, HealthRouter+"_"+joinIn.Switch)
	if !reflect.DeepEqual(js.Routers, []Router{{Name: HealthRouter}}) || link == nil || len(link.GatewayChassis) > 0 {
		t.Fatalf("join shard: routers %+v, router ports %+v", js.Routers, js.RouterPorts)
	}
	lsp := SwitchPort{Switch: joinIn.Switch, Name: SwitchRouterPortName(joinIn.Switch, HealthRouter), Type: "router",
		Addresses: []string{"router"}, Options: map[string]string{"router-port": link.Name}}
	if !slices.ContainsFunc(js.SwitchPorts, func(p SwitchPort) bool { return reflect.DeepEqual(p, lsp) }) {
		t.Errorf("join switch ports %+v, want one %+v", js.SwitchPorts, lsp)
	}
	for _, in := range []SubnetIn{defaultIn, customIn} {
		if sh := ForSubnet(in, &joinIn, nil); len(sh.Routers) > 0 || len(sh.RouterPorts) != 1 {
			t.Errorf("%s: routers %+v, router ports %+v", in.Name, sh.Routers, sh.RouterPorts)
		}
	}
}

// TestForSubnetRAConfigsOnlyWithIPv6: router advertisements are configured on a router port
// exactly when it has an IPv6 network, IPv6-only subnets included.
func TestForSubnetRAConfigsOnlyWithIPv6(t *testing.T) {
	v6only := SubnetIn{Name: "v6", Vpc: "ovn-cluster", Switch: "v6", CIDRs: prefixes("fd00:20::/64"), Gateways: addrs("fd00:20::1")}
	for _, tc := range []struct {
		in   SubnetIn
		want map[string]string
	}{
		{defaultIn, map[string]string{"address_mode": "dhcpv6_stateful", "send_periodic": "false"}},
		{v6only, map[string]string{"address_mode": "dhcpv6_stateful", "send_periodic": "false"}},
		{centralIn, nil},
	} {
		lrp := ForSubnet(tc.in, &joinIn, nil).RouterPorts[0]
		if !reflect.DeepEqual(lrp.IPv6RAConfigs, tc.want) {
			t.Errorf("%s (networks %v): ipv6_ra_configs %v, want %v", tc.in.Name, lrp.Networks, lrp.IPv6RAConfigs, tc.want)
		}
	}
}

func TestCustomVpcHasNoGatewayPolicies(t *testing.T) {
	sh := ForSubnet(customIn, &joinIn, nodesIn)
	if len(sh.Policies) != 0 || sh.RouterPorts[0].Router != "vpc2" {
		t.Fatalf("custom VPC subnet: policies %+v, router port %+v", sh.Policies, sh.RouterPorts)
	}
	v := ForVpc(VpcIn{Name: "vpc2", Routes: []StaticRoute{{Prefix: "0.0.0.0/0", Nexthop: "192.168.0.254"}}}, &joinIn)
	want := []StaticRoute{{Router: "vpc2", Prefix: "0.0.0.0/0", Nexthop: "192.168.0.254"}}
	if !reflect.DeepEqual(v.Routes, want) {
		t.Fatalf("vpc2 routes %+v, want only its spec's %+v", v.Routes, want)
	}
}

func TestForVpcDefaultRoutes(t *testing.T) {
	v := ForVpc(VpcIn{Name: "ovn-cluster"}, &joinIn)
	want := []StaticRoute{{Router: "ovn-cluster", Prefix: "0.0.0.0/0", Nexthop: "100.64.0.1"}, {Router: "ovn-cluster", Prefix: "::/0", Nexthop: "fd00:100:64::1"}}
	if !reflect.DeepEqual(v.Routes, want) || !reflect.DeepEqual(v.Routers, []Router{{Name: "ovn-cluster"}}) {
		t.Fatalf("ovn-cluster shard %+v", v)
	}
	if v := ForVpc(VpcIn{Name: "ovn-cluster"}, nil); len(v.Routes) != 0 {
		t.Fatalf("routes without a join subnet: %+v", v.Routes)
	}
}

// TestServiceLBGroupOwnership: the join subnet owns the Services' load balancer group; the
// switches of its VPC reference it, a custom VPC's do not.
func TestServiceLBGroupOwnership(t *testing.T) {
	j := ForSubnet(joinIn, &joinIn, nil)
	if !reflect.DeepEqual(j.LoadBalancerGroups, []LoadBalancerGroup{{Name: ClusterLBGroup}}) ||
		!reflect.DeepEqual(j.Switches[0].LBGroups, []string{ClusterLBGroup}) {
		t.Fatalf("join shard: groups %+v, switch %+v", j.LoadBalancerGroups, j.Switches)
	}
	if d := ForSubnet(defaultIn, &joinIn, nil); len(d.LoadBalancerGroups) != 0 {
		t.Fatalf("the default subnet owns a group: %+v", d.LoadBalancerGroups)
	}
	if sh := ForSubnet(customIn, &joinIn, nil); len(sh.Switches[0].LBGroups) != 0 || len(sh.LoadBalancerGroups) != 0 {
		t.Fatalf("a custom VPC's switch references or owns the Service LB group: %+v", sh)
	}
}

func TestForNode(t *testing.T) {
	sh := ForNode(nodesIn["n1"], &joinIn)
	wantPort := SwitchPort{Switch: "join", Name: "node-n1", Addresses: []string{"0a:58:64:40:00:02 100.64.0.2 fd00:100:64::2"},
		ExternalIDs: map[string]string{"node": "n1"}}
	if !reflect.DeepEqual(sh.SwitchPorts, []SwitchPort{wantPort}) {
		t.Errorf("ports %+v, want %+v", sh.SwitchPorts, wantPort)
	}
	if !reflect.DeepEqual(sh.PortGroups, []PortGroup{{Name: "kovn_node_n1", OwnsACLs: true}}) {
		t.Errorf("port groups %+v", sh.PortGroups)
	}
	// The node's own join addresses, and only they, reach its pods whatever their policies.
	own := func(f, ip string) ACL {
		return ACL{PortGroup: "kovn_node_n1", Name: "n1:own-join/" + f, Direction: "to-lport", Priority: PriorityNodeOwnJoin,
			Match: "outport == @kovn_node_n1 && " + f + ".src == " + ip, Action: "allow-related",
			ExternalIDs: map[string]string{"node": "n1", IPFamilyKey: f}}
	}
	if want := []ACL{own("ip4", "100.64.0.2"), own("ip6", "fd00:100:64::2")}; !reflect.DeepEqual(sh.ACLs, want) {
		t.Errorf("ACLs\n got %+v\nwant %+v", sh.ACLs, want)
	}
	if PriorityNodeOwnJoin <= PrioritySubnetPrivateDeny || PriorityNodeOwnJoin >= PrioritySubnetACLBase {
		t.Errorf("own-join allow at %d: must be above private isolation (%d), below the admin's ACLs (%d)",
			PriorityNodeOwnJoin, PrioritySubnetPrivateDeny, PrioritySubnetACLBase)
	}
	r := func(prio int, match, hop string) Policy {
		return Policy{Router: "ovn-cluster", Priority: prio, Action: "reroute", Match: match, Nexthops: []string{hop}}
	}
	want := []Policy{
		r(PriorityNodeReroute, "ip4.dst == 172.18.0.2", "100.64.0.2"),
		r(PriorityNodeReroute, "ip6.dst == fc00::2", "fd00:100:64::2"),
		r(PriorityDistributedGW, "ip4.src == $kovn_node_n1_ip4", "100.64.0.2"),
		r(PriorityDistributedGW, "ip6.src == $kovn_node_n1_ip6", "fd00:100:64::2"),
	}
	if !reflect.DeepEqual(sh.Policies, want) {
		t.Errorf("policies:\n got %+v\nwant %+v", sh.Policies, want)
	}
	if n2 := ForNode(nodesIn["n2"], &joinIn); len(n2.Policies) != 2 {
		t.Errorf("n2 (no IPv6 join address): %d policies, want 2 (IPv4 only)", len(n2.Policies))
	}
	if n4 := ForNode(nodesIn["n4"], &joinIn); len(n4.SwitchPorts) != 0 || len(n4.Policies) != 0 || len(n4.PortGroups) != 1 {
		t.Errorf("n4 without a join address: %+v", n4)
	}
}

func TestForPod(t *testing.T) {
	sh := ForPod(PodIn{Namespace: "default", Name: "a", Node: "c1-n1", Switch: "ovn-default", IPs: addrs("10.16.0.5", "fd00:10:16::5"), MAC: "0a:58:0a:10:00:05"})
	addr := "0a:58:0a:10:00:05 10.16.0.5 fd00:10:16::5"
	want := Shard{OwnerType: OwnerPod, Owner: "default/a", SwitchPorts: []SwitchPort{{Switch: "ovn-default", Name: "a.default",
		Addresses: []string{addr}, PortSecurity: []string{addr}, ExternalIDs: map[string]string{"pod": "default/a", "node": "c1-n1"}}},
		Memberships: []Membership{{PortGroup: NodePortGroup("c1-n1"), Port: "a.default"}}}
	if !reflect.DeepEqual(sh, want) {
		t.Fatalf("pod shard:\n got %+v\nwant %+v", sh, want)
	}
}

// TestForPodAttachments: an attachment port joins the pod's shard on its own switch, with
// port security, but stays out of the node's port group (eth0's egress steering).
func TestForPodAttachments(t *testing.T) {
	sh := ForPod(PodIn{Namespace: "default", Name: "a", Node: "c1-n1", Switch: "ovn-default", IPs: addrs("10.16.0.5"), MAC: "0a:58:0a:10:00:05",
		Attachments: []AttachmentIn{{Interface: "net1", Switch: "att", IPs: addrs("10.20.0.7", "fd00:20::7"), MAC: "0a:58:0a:14:00:07"}}})
	addr := "0a:58:0a:14:00:07 10.20.0.7 fd00:20::7"
	want := SwitchPort{Switch: "att", Name: "a.default.net1", Addresses: []string{addr}, PortSecurity: []string{addr},
		ExternalIDs: map[string]string{"pod": "default/a", "node": "c1-n1", "interface": "net1"}}
	if len(sh.SwitchPorts) != 2 || !reflect.DeepEqual(sh.SwitchPorts[1], want) {
		t.Fatalf("ports %+v, want eth0's and %+v", sh.SwitchPorts, want)
	}
	if len(sh.Memberships) != 1 || sh.Memberships[0].Port != "a.default" {
		t.Errorf("memberships %+v, want eth0's port only", sh.Memberships)
	}
}

func TestRouterMAC(t *testing.T) {
	form := regexp.MustCompile(`^0a(:[0-9a-f]{2}){5}$`) // locally administered, unicast
	seen := map[string]string{}
	for _, name := range []string{"ovn-cluster-ovn-default", "ovn-cluster-join", "vpc2-custom", "a", ""} {
		mac := RouterMAC(name)
		if !form.MatchString(mac) {
			t.Errorf("RouterMAC(%q) = %q, not a local unicast MAC", name, mac)
		}
		if again := RouterMAC(name); again != mac {
			t.Errorf("RouterMAC(%q) not stable: %q then %q", name, mac, again)
		}
		if other, dup := seen[mac]; dup {
			t.Errorf("RouterMAC(%q) = RouterMAC(%q) = %s", name, other, mac)
		}
		seen[mac] = name
	}
}

func TestNodePortGroup(t *testing.T) {
	if got := NodePortGroup("n1"); got != "kovn_node_n1" {
		t.Errorf("NodePortGroup(n1) = %q, want kovn_node_n1 (plain names stay readable)", got)
	}
	valid := regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	seen := map[string]string{}
	for _, node := range []string{"c1-n1", "c1.n1", "c1_n1", "worker.example.com", "Node-A9", "ü", "a-b", "a.b"} {
		got := NodePortGroup(node)
		if !valid.MatchString(got) || !strings.HasPrefix(got, "kovn_node_") {
			t.Errorf("NodePortGroup(%q) = %q: not a valid port group name", node, got)
		}
		if got != NodePortGroup(node) {
			t.Errorf("NodePortGroup(%q) is not stable", node)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("nodes %q and %q share port group %q", other, node, got)
		}
		seen[got] = node
	}
	if !strings.HasPrefix(NodePortGroup("c1-n1"), "kovn_node_c1_n1_") {
		t.Errorf("NodePortGroup(c1-n1) = %q: want the readable part kept", NodePortGroup("c1-n1"))
	}
}

// An underlay subnet is its switch and a tagged localnet port naming the provider: no router
// port (the physical router is the gateway), no policies, no Services' load balancers.
func TestForSubnetUnderlay(t *testing.T) {
	join := &SubnetIn{Name: "join", Vpc: "ovn-cluster", Switch: "join", CIDRs: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")},
		Gateways: []netip.Addr{netip.MustParseAddr("100.64.0.1")}}
	s := SubnetIn{Name: "vlan100", Vpc: "ovn-cluster", Switch: "vlan100",
		CIDRs:    []netip.Prefix{netip.MustParsePrefix("172.28.100.0/24"), netip.MustParsePrefix("fd00:28:100::/64")},
		Gateways: []netip.Addr{netip.MustParseAddr("172.28.100.1"), netip.MustParseAddr("fd00:28:100::1")},
		Underlay: &UnderlayIn{Provider: "phys", VlanID: 100}}
	sh := ForSubnet(s, join, nil)
	if len(sh.Switches) != 1 || len(sh.Switches[0].LBGroups) != 0 || sh.Switches[0].OtherConfig["subnet"] != "172.28.100.0/24" {
		t.Fatalf("switches %+v, want vlan100 with its subnet and no load balancer group", sh.Switches)
	}
	if len(sh.RouterPorts) != 0 || len(sh.Policies) != 0 || len(sh.Routes) != 0 {
		t.Fatalf("router ports %+v, policies %+v, routes %+v: an underlay subnet has none", sh.RouterPorts, sh.Policies, sh.Routes)
	}
	if len(sh.SwitchPorts) != 1 {
		t.Fatalf("switch ports %+v, want only the localnet port", sh.SwitchPorts)
	}
	lp := sh.SwitchPorts[0]
	if lp.Name != "localnet-vlan100" || lp.Type != "localnet" || lp.Options["network_name"] != "phys" || lp.Tag == nil || *lp.Tag != 100 ||
		len(lp.Addresses) != 1 || lp.Addresses[0] != "unknown" {
		t.Fatalf("localnet port %+v (tag %v)", lp, lp.Tag)
	}
	s.Underlay.VlanID = 0
	if lp := ForSubnet(s, join, nil).SwitchPorts[0]; lp.Tag != nil {
		t.Fatalf("VLAN 0 (untagged) got tag %d", *lp.Tag)
	}
}

// Router port MACs stay out of the pods' range 0a:58 (a tenant may ask for any MAC there):
// of 4,096 port names, those hashing to 0a:58 (about 16) move to 0a:59.
func TestRouterMACNeverInThePodsRange(t *testing.T) {
	moved := 0
	for i := range 4096 {
		name := fmt.Sprintf("rtr-port-%d", i)
		mac := RouterMAC(name)
		if strings.HasPrefix(mac, "0a:58:") {
			t.Fatalf("RouterMAC(%q) = %s, in the pods' range", name, mac)
		}
		if h := sha256.Sum256([]byte(name)); h[0] == 0x58 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no name of 4,096 hashed to 0a:58: the test proves nothing")
	}
}
