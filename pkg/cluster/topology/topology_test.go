package topology

import (
	"math/rand"
	"net/netip"
	"reflect"
	"regexp"
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

// fixture is a small cluster: a dual-stack default subnet, a dual-stack join subnet, a
// centralized IPv4 subnet and a custom VPC; four nodes in various states; pods on each subnet
// and one on a node that no longer exists.
func fixture() Input {
	return Input{
		Vpcs: []VpcIn{{Name: "ovn-cluster"}, {Name: "vpc2"}},
		Subnets: []SubnetIn{
			{Name: "ovn-default", Vpc: "ovn-cluster", Switch: "ovn-default",
				CIDRs: prefixes("10.16.0.0/16", "fd00:10:16::/64"), Gateways: addrs("10.16.0.1", "fd00:10:16::1"),
				ExcludeIPs: []string{"10.16.0.2..10.16.0.9", "10.16.0.100"}},
			{Name: "join", Vpc: "ovn-cluster", Switch: "join",
				CIDRs: prefixes("100.64.0.0/16", "fd00:100:64::/112"), Gateways: addrs("100.64.0.1", "fd00:100:64::1")},
			{Name: "central", Vpc: "ovn-cluster", Switch: "central-ls", CIDRs: prefixes("10.20.0.0/24"),
				Gateways: addrs("10.20.0.1"), Centralized: true, GatewayNodes: []string{"gone", "n4", "n3", "n2", "n1"}},
			{Name: "custom", Vpc: "vpc2", Switch: "custom", CIDRs: prefixes("192.168.0.0/24"), Gateways: addrs("192.168.0.1")},
		},
		InvalidSubnets: []string{"zz-broken", "bad"},
		JoinSubnet:     "join",
		Nodes: []NodeIn{
			{Name: "n1", Ready: true, NodeIPs: addrs("172.18.0.2", "fc00::2"),
				JoinIPs: addrs("100.64.0.2", "fd00:100:64::2"), JoinMAC: "0a:58:64:40:00:02"},
			// IPv6 node address but no IPv6 join address: no IPv6 reroute.
			{Name: "n2", Ready: true, NodeIPs: addrs("172.18.0.3", "fc00::3"), JoinIPs: addrs("100.64.0.3"), JoinMAC: "0a:58:64:40:00:03"},
			{Name: "n3", Ready: false, NodeIPs: addrs("172.18.0.4"), JoinIPs: addrs("100.64.0.4"), JoinMAC: "0a:58:64:40:00:04"},
			{Name: "n4", Ready: true, NodeIPs: addrs("172.18.0.5")}, // join address not assigned yet
		},
		Pods: []PodIn{
			{Namespace: "default", Name: "a", Node: "n1", Subnet: "ovn-default", IPs: addrs("10.16.0.5", "fd00:10:16::5"), MAC: "0a:58:0a:10:00:05"},
			{Namespace: "default", Name: "b", Node: "n2", Subnet: "ovn-default", IPs: addrs("10.16.0.6", "fd00:10:16::6"), MAC: "0a:58:0a:10:00:06"},
			{Namespace: "kube-system", Name: "c", Node: "n1", Subnet: "central", IPs: addrs("10.20.0.2"), MAC: "0a:58:0a:14:00:02"},
			{Namespace: "tenant", Name: "d", Node: "n2", Subnet: "custom", IPs: addrs("192.168.0.2"), MAC: "0a:58:c0:a8:00:02"},
			{Namespace: "default", Name: "e", Node: "gone", Subnet: "ovn-default", IPs: addrs("10.16.0.7"), MAC: "0a:58:0a:10:00:07"},
		},
	}
}

func routerNamed(t *testing.T, d Desired, name string) Router {
	t.Helper()
	for _, r := range d.Routers {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no router %q in %+v", name, d.Routers)
	return Router{}
}

func switchNamed(t *testing.T, d Desired, name string) Switch {
	t.Helper()
	for _, s := range d.Switches {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no switch %q", name)
	return Switch{}
}

func portNamed(sw Switch, name string) (SwitchPort, bool) {
	for _, p := range sw.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return SwitchPort{}, false
}

func TestRouterPorts(t *testing.T) {
	d := For(fixture())
	tests := []struct {
		router string
		want   []RouterPort
	}{
		{"ovn-cluster", []RouterPort{ // sorted by name
			{Name: "ovn-cluster-central-ls", Networks: []string{"10.20.0.1/24"}},
			{Name: "ovn-cluster-join", Networks: []string{"100.64.0.1/16", "fd00:100:64::1/112"}},
			{Name: "ovn-cluster-ovn-default", Networks: []string{"10.16.0.1/16", "fd00:10:16::1/64"}},
		}},
		{"vpc2", []RouterPort{{Name: "vpc2-custom", Networks: []string{"192.168.0.1/24"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.router, func(t *testing.T) {
			r := routerNamed(t, d, tc.router)
			if r.Owner != tc.router {
				t.Errorf("owner = %q, want %q", r.Owner, tc.router)
			}
			for i := range tc.want {
				tc.want[i].MAC = RouterMAC(tc.want[i].Name)
			}
			if !reflect.DeepEqual(r.Ports, tc.want) {
				t.Errorf("ports:\n got %+v\nwant %+v", r.Ports, tc.want)
			}
		})
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

func TestSwitchOtherConfig(t *testing.T) {
	d := For(fixture())
	tests := []struct {
		ls, owner string
		want      map[string]string
	}{
		{"ovn-default", "ovn-default", map[string]string{"subnet": "10.16.0.0/16", "ipv6_prefix": "fd00:10:16::",
			"exclude_ips": "10.16.0.2..10.16.0.9 10.16.0.100"}},
		{"join", "join", map[string]string{"subnet": "100.64.0.0/16", "ipv6_prefix": "fd00:100:64::"}},
		{"central-ls", "central", map[string]string{"subnet": "10.20.0.0/24"}},
		{"custom", "custom", map[string]string{"subnet": "192.168.0.0/24"}},
	}
	if len(d.Switches) != len(tests) {
		t.Errorf("%d switches, want %d", len(d.Switches), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.ls, func(t *testing.T) {
			sw := switchNamed(t, d, tc.ls)
			if sw.Owner != tc.owner {
				t.Errorf("owner = %q, want %q", sw.Owner, tc.owner)
			}
			if !reflect.DeepEqual(sw.OtherConfig, tc.want) {
				t.Errorf("other_config = %v, want %v", sw.OtherConfig, tc.want)
			}
		})
	}
}

func TestSwitchRouterPort(t *testing.T) {
	d := For(fixture())
	for _, tc := range []struct{ ls, port, routerPort string }{
		{"ovn-default", "ovn-default-ovn-cluster", "ovn-cluster-ovn-default"},
		{"join", "join-ovn-cluster", "ovn-cluster-join"},
		{"central-ls", "central-ls-ovn-cluster", "ovn-cluster-central-ls"},
		{"custom", "custom-vpc2", "vpc2-custom"},
	} {
		t.Run(tc.ls, func(t *testing.T) {
			p, ok := portNamed(switchNamed(t, d, tc.ls), tc.port)
			want := SwitchPort{Name: tc.port, Type: "router", Addresses: []string{"router"},
				Options: map[string]string{"router-port": tc.routerPort}}
			if !ok || !reflect.DeepEqual(p, want) {
				t.Errorf("port = %+v (found %v), want %+v", p, ok, want)
			}
		})
	}
}

func TestPodPorts(t *testing.T) {
	d := For(fixture())
	tests := []struct {
		ls, port, addr, pod, node string
	}{
		{"ovn-default", "a.default", "0a:58:0a:10:00:05 10.16.0.5 fd00:10:16::5", "default/a", "n1"},
		{"ovn-default", "b.default", "0a:58:0a:10:00:06 10.16.0.6 fd00:10:16::6", "default/b", "n2"},
		{"ovn-default", "e.default", "0a:58:0a:10:00:07 10.16.0.7", "default/e", "gone"},
		{"central-ls", "c.kube-system", "0a:58:0a:14:00:02 10.20.0.2", "kube-system/c", "n1"},
		{"custom", "d.tenant", "0a:58:c0:a8:00:02 192.168.0.2", "tenant/d", "n2"},
	}
	for _, tc := range tests {
		t.Run(tc.port, func(t *testing.T) {
			p, ok := portNamed(switchNamed(t, d, tc.ls), tc.port)
			want := SwitchPort{Name: tc.port, Addresses: []string{tc.addr}, PortSecurity: []string{tc.addr},
				ExternalIDs: map[string]string{"pod": tc.pod, "node": tc.node}}
			if !ok || !reflect.DeepEqual(p, want) {
				t.Errorf("port = %+v (found %v), want %+v", p, ok, want)
			}
		})
	}
	// Ports are sorted by name on every switch.
	got := []string{}
	for _, p := range switchNamed(t, d, "ovn-default").Ports {
		got = append(got, p.Name)
	}
	if want := []string{"a.default", "b.default", "e.default", "ovn-default-ovn-cluster"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ovn-default ports = %v, want %v", got, want)
	}
}

func TestNodePorts(t *testing.T) {
	d := For(fixture())
	// ovn0 is not port-secured: it receives traffic for addresses that are not its own.
	want := []SwitchPort{
		{Name: "join-ovn-cluster", Type: "router", Addresses: []string{"router"}, Options: map[string]string{"router-port": "ovn-cluster-join"}},
		{Name: "node-n1", Addresses: []string{"0a:58:64:40:00:02 100.64.0.2 fd00:100:64::2"}, ExternalIDs: map[string]string{"node": "n1"}},
		{Name: "node-n2", Addresses: []string{"0a:58:64:40:00:03 100.64.0.3"}, ExternalIDs: map[string]string{"node": "n2"}},
		{Name: "node-n3", Addresses: []string{"0a:58:64:40:00:04 100.64.0.4"}, ExternalIDs: map[string]string{"node": "n3"}},
	} // n4 has no join address yet: no port
	if got := switchNamed(t, d, "join").Ports; !reflect.DeepEqual(got, want) {
		t.Errorf("join ports:\n got %+v\nwant %+v", got, want)
	}
	for _, ls := range []string{"ovn-default", "central-ls", "custom"} {
		if _, ok := portNamed(switchNamed(t, d, ls), "node-n1"); ok {
			t.Errorf("node port on switch %s", ls)
		}
	}
	// A node with join IPs but no MAC gets no port either.
	in := fixture()
	in.Nodes[0].JoinMAC = ""
	if _, ok := portNamed(switchNamed(t, For(in), "join"), "node-n1"); ok {
		t.Error("node without join MAC has a port")
	}
}

func TestPortGroups(t *testing.T) {
	want := []PortGroup{
		{Name: "kovn_node_n1", Owner: "n1", Ports: []string{"a.default", "c.kube-system"}},
		{Name: "kovn_node_n2", Owner: "n2", Ports: []string{"b.default", "d.tenant"}},
		{Name: "kovn_node_n3", Owner: "n3"},
		{Name: "kovn_node_n4", Owner: "n4"},
	} // the pod on node "gone" is in no group
	if got := For(fixture()).PortGroups; !reflect.DeepEqual(got, want) {
		t.Errorf("port groups:\n got %+v\nwant %+v", got, want)
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

func reroute(prio int, match, hop string) Policy {
	return Policy{Priority: prio, Match: match, Action: "reroute", Nexthops: []string{hop}}
}

func allow(match string) Policy {
	return Policy{Priority: PriorityAllowCluster, Match: match, Action: "allow"}
}

func TestPoliciesAndRoutes(t *testing.T) {
	r := routerNamed(t, For(fixture()), "ovn-cluster")
	want := []Policy{ // priority descending, then match
		allow("ip4.dst == 10.16.0.0/16"),
		allow("ip4.dst == 10.20.0.0/24"),
		allow("ip4.dst == 100.64.0.0/16"),
		allow("ip6.dst == fd00:100:64::/112"),
		allow("ip6.dst == fd00:10:16::/64"),
		reroute(PriorityNodeReroute, "ip4.dst == 172.18.0.2", "100.64.0.2"),
		reroute(PriorityNodeReroute, "ip4.dst == 172.18.0.3", "100.64.0.3"),
		reroute(PriorityNodeReroute, "ip4.dst == 172.18.0.4", "100.64.0.4"),
		reroute(PriorityNodeReroute, "ip6.dst == fc00::2", "fd00:100:64::2"),
		// gone: no such node; n4: no join IP; n3: not Ready; n2 is the first eligible.
		reroute(PriorityCentralGateway, "ip4.src == 10.20.0.0/24", "100.64.0.3"),
		reroute(PriorityDistributedGW, "ip4.src == $kovn_node_n1_ip4", "100.64.0.2"),
		reroute(PriorityDistributedGW, "ip4.src == $kovn_node_n2_ip4", "100.64.0.3"),
		reroute(PriorityDistributedGW, "ip4.src == $kovn_node_n3_ip4", "100.64.0.4"),
		reroute(PriorityDistributedGW, "ip6.src == $kovn_node_n1_ip6", "fd00:100:64::2"),
	}
	if !reflect.DeepEqual(r.Policies, want) {
		t.Errorf("policies:\n got %+v\nwant %+v", r.Policies, want)
	}
	wantRoutes := []StaticRoute{{Prefix: "0.0.0.0/0", Nexthop: "100.64.0.1"}, {Prefix: "::/0", Nexthop: "fd00:100:64::1"}}
	if !reflect.DeepEqual(r.Routes, wantRoutes) {
		t.Errorf("routes = %+v, want %+v", r.Routes, wantRoutes)
	}
}

func TestCentralizedGateway(t *testing.T) {
	tests := []struct {
		desc     string
		gateways []string
		mutate   func(*Input)
		want     []Policy // priority 29500 only
	}{
		{desc: "first Ready with join IP wins", gateways: []string{"n1", "n2"},
			want: []Policy{reroute(PriorityCentralGateway, "ip4.src == 10.20.0.0/24", "100.64.0.2")}},
		{desc: "preference order, not node order", gateways: []string{"n2", "n1"},
			want: []Policy{reroute(PriorityCentralGateway, "ip4.src == 10.20.0.0/24", "100.64.0.3")}},
		{desc: "failover when the first is not Ready", gateways: []string{"n1", "n2"},
			mutate: func(in *Input) { in.Nodes[0].Ready = false },
			want:   []Policy{reroute(PriorityCentralGateway, "ip4.src == 10.20.0.0/24", "100.64.0.3")}},
		{desc: "no eligible gateway: no policy", gateways: []string{"gone", "n3", "n4"}},
		{desc: "no gateway nodes: no policy", gateways: nil},
		{desc: "distributed subnet: no policy", gateways: []string{"n1"},
			mutate: func(in *Input) { in.Subnets[2].Centralized = false }},
		{desc: "dual stack: one policy per family the gateway has", gateways: []string{"n1"},
			mutate: func(in *Input) {
				in.Subnets[2].CIDRs = prefixes("10.20.0.0/24", "fd00:20::/64")
				in.Subnets[2].Gateways = addrs("10.20.0.1", "fd00:20::1")
			},
			want: []Policy{
				reroute(PriorityCentralGateway, "ip4.src == 10.20.0.0/24", "100.64.0.2"),
				reroute(PriorityCentralGateway, "ip6.src == fd00:20::/64", "fd00:100:64::2"),
			}},
		{desc: "dual stack, IPv4-only gateway: IPv4 policy only", gateways: []string{"n2"},
			mutate: func(in *Input) {
				in.Subnets[2].CIDRs = prefixes("10.20.0.0/24", "fd00:20::/64")
				in.Subnets[2].Gateways = addrs("10.20.0.1", "fd00:20::1")
			},
			want: []Policy{reroute(PriorityCentralGateway, "ip4.src == 10.20.0.0/24", "100.64.0.3")}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			in := fixture()
			in.Subnets[2].GatewayNodes = tc.gateways
			if tc.mutate != nil {
				tc.mutate(&in)
			}
			var got []Policy
			for _, p := range routerNamed(t, For(in), "ovn-cluster").Policies {
				if p.Priority == PriorityCentralGateway {
					got = append(got, p)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("centralized policies = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCustomVpcHasNoGatewayPolicies(t *testing.T) {
	tests := []struct {
		desc   string
		mutate func(*Input)
		router string
	}{
		{desc: "custom VPC next to the join subnet's", router: "vpc2"},
		{desc: "join subnet in another VPC", router: "ovn-cluster",
			mutate: func(in *Input) { in.Subnets[1].Vpc = "vpc2" }},
		{desc: "no join subnet at all", router: "ovn-cluster",
			mutate: func(in *Input) { in.JoinSubnet = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			in := fixture()
			if tc.mutate != nil {
				tc.mutate(&in)
			}
			r := routerNamed(t, For(in), tc.router)
			if len(r.Ports) == 0 {
				t.Error("router has no ports")
			}
			if r.Policies != nil || r.Routes != nil {
				t.Errorf("policies = %+v, routes = %+v; want none", r.Policies, r.Routes)
			}
		})
	}
}

func TestFrozen(t *testing.T) {
	tests := []struct {
		invalid, want []string
	}{
		{nil, nil},
		{[]string{"b", "a"}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		in := fixture()
		in.InvalidSubnets = tc.invalid
		if got := For(in).Frozen; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Frozen(%v) = %v, want %v", tc.invalid, got, tc.want)
		}
	}
}

func shuffled[T any](rng *rand.Rand, xs []T) []T {
	out := append([]T(nil), xs...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestDeterministic(t *testing.T) {
	want := For(fixture())
	for seed := int64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		in := fixture()
		in.Vpcs, in.Subnets, in.Nodes = shuffled(rng, in.Vpcs), shuffled(rng, in.Subnets), shuffled(rng, in.Nodes)
		in.Pods, in.InvalidSubnets = shuffled(rng, in.Pods), shuffled(rng, in.InvalidSubnets)
		if got := For(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: output depends on input order:\n got %+v\nwant %+v", seed, got, want)
		}
	}
}
