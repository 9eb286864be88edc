package servicenat

import (
	"errors"
	"fmt"
	"github.com/kovn/kovn/pkg/contract"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/endpoints"
	"github.com/kovn/kovn/pkg/hostnet/netnstest"
)

func addrList(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

var (
	webCluster = NodePortService{Key: "ns/web", ClusterIPs: addrList("10.96.0.20", "fd00:10:96::14"),
		ExternalIPs: addrList("172.30.200.1"), Ports: []NodePortPort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}}}
	webLocal = NodePortService{Key: "ns/local", ClusterIPs: addrList("10.96.0.21"), LocalOnly: true,
		Ports: []NodePortPort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30081}, {Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053}},
		LocalEndpoints: []LocalEndpoint{{Addr: netip.MustParseAddr("10.16.0.7"), Ports: map[string]int32{"http": 8080}},
			{Addr: netip.MustParseAddr("10.16.0.5"), Ports: map[string]int32{"http": 8080}}}}
)

// TestNodePortRulesCluster: ETP=Cluster NodePorts and external IPs are marked for masquerade
// and sent to the ClusterIP of their family.
func TestNodePortRulesCluster(t *testing.T) {
	v4 := NodePortRules(true, []NodePortService{webCluster}, NodeSide{})
	for _, want := range []string{
		`-A KOVN-NODEPORT-MASQ -m mark --mark 0x4000/0x4000 -j MASQUERADE`,
		`-A KOVN-NODEPORT-MASQ -o ovn0 -m addrtype ! --src-type LOCAL -m conntrack ! --ctstate DNAT -j MASQUERADE`,
		`-A KOVN-NODEPORTS -m addrtype --dst-type LOCAL -p tcp --dport 30080 -m comment --comment "ns/web:http" -j MARK --set-xmark 0x4000/0x4000`,
		`-A KOVN-NODEPORTS -m addrtype --dst-type LOCAL -p tcp --dport 30080 -m comment --comment "ns/web:http" -j DNAT --to-destination 10.96.0.20:80`,
		`-A KOVN-NODEPORTS -d 172.30.200.1/32 -p tcp --dport 80 -m comment --comment "ns/web:http" -j DNAT --to-destination 10.96.0.20:80`,
	} {
		if !strings.Contains(v4, want+"\n") {
			t.Errorf("IPv4 rules lack %q:\n%s", want, v4)
		}
	}
	v6 := NodePortRules(false, []NodePortService{webCluster}, NodeSide{})
	if !strings.Contains(v6, "--dport 30080 -m comment --comment \"ns/web:http\" -j DNAT --to-destination [fd00:10:96::14]:80\n") ||
		strings.Contains(v6, "172.30.200.1") {
		t.Errorf("IPv6 rules:\n%s", v6)
	}
}

// TestNodePortRulesLocal: ETP=Local goes straight to this node's endpoints, spread evenly and
// not masqueraded; a port without a local endpoint is rejected.
func TestNodePortRulesLocal(t *testing.T) {
	v4 := NodePortRules(true, []NodePortService{webLocal}, NodeSide{})
	head := `-A KOVN-NODEPORTS -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http"`
	for _, want := range []string{
		head + " -m statistic --mode random --probability 0.50000 -j DNAT --to-destination 10.16.0.5:8080",
		head + " -j DNAT --to-destination 10.16.0.7:8080",
		`-A KOVN-NODEPORT-REJECT -m addrtype --dst-type LOCAL -p udp --dport 30053 -m comment --comment "ns/local:dns" -j REJECT`,
	} {
		if !strings.Contains(v4, want+"\n") {
			t.Errorf("IPv4 rules lack %q:\n%s", want, v4)
		}
	}
	if strings.Contains(v4, head+" -j MARK") {
		t.Errorf("ETP=Local traffic from outside is masqueraded (the client address would be lost):\n%s", v4)
	}
	if v6 := NodePortRules(false, []NodePortService{webLocal}, NodeSide{}); strings.Contains(v6, "ns/local") {
		t.Errorf("an IPv4-only Service has IPv6 rules:\n%s", v6)
	}
}

// TestNodePortRulesApply: the rules load into a real packet filter (in a throwaway netns) and
// a rewrite replaces them.
func TestNodePortRulesApply(t *testing.T) {
	netnstest.Do(t, func() {
		for _, is4 := range []bool{true, false} {
			tool := map[bool]string{true: "iptables", false: "ip6tables"}[is4]
			if err := SyncOwnPodsSet(is4, nil); err != nil { // matched by ns/local's rules
				t.Fatal(err)
			}
			join := NodeSide{Join: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd00:100:64::/64")}}
			for _, svcs := range [][]NodePortService{{webCluster, webLocal}, {webCluster}} {
				if err := ApplyNodePortRules(is4, NodePortRules(is4, svcs, join)); err != nil {
					t.Fatal(err)
				}
			}
			nat, err := exec.Command(tool, "-t", "nat", "-S").CombinedOutput()
			if err != nil {
				t.Fatalf("%s -S: %v %s", tool, err, nat)
			}
			filter, _ := exec.Command(tool, "-t", "filter", "-S").CombinedOutput()
			s := string(nat) + string(filter)
			if strings.Count(s, "-j KOVN-NODEPORTS") != 2 || strings.Count(s, "-j KOVN-NODEPORT-MASQ") != 1 ||
				strings.Count(s, "-j KOVN-NODEPORT-REJECT") != 2 || !strings.Contains(s, "30080") || strings.Contains(s, "30081") ||
				strings.Contains(s, "30053") || !strings.Contains(s, "-o ovn0 -m addrtype ! --src-type LOCAL -m conntrack ! --ctstate DNAT -j MASQUERADE") ||
				!strings.Contains(s, "! -o ovn0 -m addrtype --src-type LOCAL ! --dst-type LOCAL -m conntrack --ctstate DNAT -j MASQUERADE") {
				t.Fatalf("%s after two syncs (the second without ns/local):\n%s", tool, s)
			}
		}
	})
}

// The node translates (arriving traffic and its own, nat PREROUTING and OUTPUT) only the
// external IPs the controller's rules honour: one inside a Subnet would capture a pod's
// traffic (kubelet's probes included), one outside the admin's ranges the node's own
// connections to it (the control plane's southbound port, CVE-2020-8554).
func TestNodePortServiceTranslatesOnlyHonouredExternalIPs(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "thief"}, Spec: corev1.ServiceSpec{
		ClusterIPs: []string{"10.96.0.30"}, ExternalIPs: []string{"10.16.0.5", "198.51.100.10", "172.30.0.2"},
		Ports: []corev1.ServicePort{{Name: "sb", Protocol: corev1.ProtocolTCP, Port: 6642}}}}
	inCluster := []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16")}
	rules := contract.ExternalIPRules{Allowed: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, Reserved: inCluster}
	external, _ := rules.ExternalIPs(svc, rules.Claims([]corev1.Service{*svc}))
	s, ok := nodePortService(svc, inCluster, external)
	if !ok || len(s.ExternalIPs) != 1 || s.ExternalIPs[0] != netip.MustParseAddr("198.51.100.10") {
		t.Errorf("external IPs %v (ok %v), want only 198.51.100.10", s.ExternalIPs, ok)
	}
	if out := NodePortRules(true, []NodePortService{s}, NodeSide{}); !strings.Contains(out, "-d 198.51.100.10/32 -p tcp --dport 6642") ||
		strings.Contains(out, "172.30.0.2") || strings.Contains(out, "10.16.0.5") {
		t.Errorf("rules:\n%s", out)
	}
	svc.Spec.ExternalIPs = []string{"10.16.0.5", "172.30.0.2"}
	external, _ = rules.ExternalIPs(svc, rules.Claims([]corev1.Service{*svc}))
	if s, ok := nodePortService(svc, inCluster, external); ok {
		t.Errorf("a Service left with no node-facing address was kept: %+v", s)
	}
}

// Traffic from outside (routed in over BGP) keeps its client address where the reply comes
// back through this node: this node's pods in distributed-gateway subnets of the default VPC;
// a Local-policy announced Service's ClusterIP goes to local endpoints.
func TestKeepSourceAndOutsideClusterIPs(t *testing.T) {
	sub := func(name, cidr string, nat bool, gw kovnv1.GatewayType, vpc string) kovnv1.Subnet {
		return kovnv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kovnv1.SubnetSpec{CIDRBlock: cidr, NATOutgoing: nat, GatewayType: gw, Vpc: vpc}}
	}
	ip := func(pod, subnet, node, v4 string) kovnv1.IP {
		return kovnv1.IP{Spec: kovnv1.IPSpec{PodName: pod, Namespace: "ns", Subnet: subnet, NodeName: node, V4IP: v4}}
	}
	subnets := []kovnv1.Subnet{
		sub("natted", "10.16.0.0/16", true, "", ""),
		sub("central", "10.17.0.0/24", true, kovnv1.GatewayCentralized, ""),
		sub("routed", "10.18.0.0/24,fd00:18::/64", false, "", ""),
		sub("tenant", "10.19.0.0/24", false, "", "vpc1"),
	}
	ips := []kovnv1.IP{ip("a", "natted", "n1", "10.16.0.5"), ip("b", "natted", "n2", "10.16.0.6"),
		ip("c", "central", "n1", "10.17.0.5"), ip("", "natted", "n1", "10.16.0.2"), ip("d", "routed", "n1", "10.18.0.9"),
		ip("e", "tenant", "n1", "10.19.0.9")}
	var got []string
	for _, p := range keepSourcePrefixes(subnets, ips, "n1") {
		got = append(got, p.String())
	}
	if strings.Join(got, " ") != "10.16.0.5/32 10.18.0.9/32" {
		t.Errorf("keep source for %v, want n1's pods in the default VPC's distributed subnets", got)
	}
	svc := NodePortService{Key: "ns/bgp", ClusterIPs: addrList("10.96.0.30"), OutsideClusterIPs: true,
		Ports:          []NodePortPort{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}},
		LocalEndpoints: []LocalEndpoint{{Addr: netip.MustParseAddr("10.16.0.5"), Ports: map[string]int32{"http": 8080}}}}
	v4 := NodePortRules(true, []NodePortService{svc}, NodeSide{KeepSource: keepSourcePrefixes(subnets, ips, "n1")})
	for _, want := range []string{
		`-A KOVN-NODEPORT-MASQ -o ovn0 -d 10.16.0.5/32 -j RETURN`,
		`-A KOVN-NODEPORT-MASQ -o ovn0 -d 10.18.0.9/32 -j RETURN`,
		`-A KOVN-NODEPORTS -d 10.96.0.30/32 -p tcp --dport 80 -m addrtype ! --src-type LOCAL -m comment --comment "ns/bgp:http" -j DNAT --to-destination 10.16.0.5:8080`,
		`-A KOVN-NODEPORT-REJECT -d 10.96.0.30/32 -p udp --dport 53 -m addrtype ! --src-type LOCAL -m comment --comment "ns/bgp:dns" -j REJECT`,
	} {
		if !strings.Contains(v4, want+"\n") {
			t.Errorf("IPv4 rules lack %q:\n%s", want, v4)
		}
	}
	if strings.Index(v4, "-j RETURN") > strings.Index(v4, "--ctstate DNAT -j MASQUERADE") {
		t.Errorf("the exemptions must come before the masquerade:\n%s", v4)
	}
}

// TestNodePortRulesLocalInternalClients: the node's own pods (its ipset) and the node itself
// reach an ETP=Local NodePort as kube-proxy (detect-local by node) lets them, through the
// ClusterIP (any endpoint, masqueraded), ports without a local endpoint included; those rules
// come before the local-only ones. A pod of another node is external here: held to this node's
// endpoints, masqueraded so its reply comes back through this node.
func TestNodePortRulesLocalInternalClients(t *testing.T) {
	svc := webLocal
	svc.PodSources = []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16"), netip.MustParsePrefix("fd00:10:16::/64")}
	v4 := NodePortRules(true, []NodePortService{svc}, NodeSide{})
	mark := " -j MARK --set-xmark 0x4000/0x4000"
	wants := []string{
		`-A KOVN-NODEPORTS -m addrtype --src-type LOCAL -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http"` + mark,
		`-A KOVN-NODEPORTS -m addrtype --src-type LOCAL -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http" -j DNAT --to-destination 10.96.0.21:80`,
		`-A KOVN-NODEPORTS -m set --match-set KOVN-OWN-PODS4 src -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http"` + mark,
		`-A KOVN-NODEPORTS -m set --match-set KOVN-OWN-PODS4 src -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http" -j DNAT --to-destination 10.96.0.21:80`,
		`-A KOVN-NODEPORTS -m set --match-set KOVN-OWN-PODS4 src -m addrtype --dst-type LOCAL -p udp --dport 30053 -m comment --comment "ns/local:dns" -j DNAT --to-destination 10.96.0.21:53`,
	}
	for _, want := range wants {
		if !strings.Contains(v4, want+"\n") {
			t.Errorf("IPv4 rules lack %q:\n%s", want, v4)
		}
	}
	local := `-A KOVN-NODEPORTS -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http" -m statistic`
	if i, j := strings.Index(v4, wants[3]), strings.Index(v4, local); j < 0 || i > j {
		t.Errorf("internal clients' rules must come before the local-only ones (at %d and %d):\n%s", i, j, v4)
	}
	// A pod of another node gets this node's endpoints, masqueraded so its reply comes back here.
	podMark := `-A KOVN-NODEPORTS -s 10.16.0.0/16 -m addrtype --dst-type LOCAL -p tcp --dport 30081 -m comment --comment "ns/local:http"` + mark + "\n"
	if i, j, k := strings.Index(v4, wants[3]), strings.Index(v4, podMark), strings.Index(v4, local); i < 0 || j < i || k < j {
		t.Errorf("the other pods' masquerade mark must come after the node's own pods and before the local targets (at %d, %d, %d):\n%s", i, j, k, v4)
	}
	if strings.Contains(v4, "fd00:10:16::") || strings.Contains(v4, "KOVN-OWN-PODS6") {
		t.Errorf("IPv4 rules name an IPv6 CIDR or set:\n%s", v4)
	}
	svc.ClusterIPs = []netip.Addr{netip.MustParseAddr("fd00:10:96::21")}
	if v6 := NodePortRules(false, []NodePortService{svc}, NodeSide{}); !strings.Contains(v6, "-m set --match-set KOVN-OWN-PODS6 src") {
		t.Errorf("IPv6 rules do not match the IPv6 set:\n%s", v6)
	}
	if !strings.Contains(v4, `-A KOVN-NODEPORT-REJECT -m addrtype --dst-type LOCAL -p udp --dport 30053 -m comment --comment "ns/local:dns" -j REJECT`) {
		t.Errorf("outside clients of a port without a local endpoint are no longer rejected:\n%s", v4)
	}
}

// TestLocalEndpointsFallBackToTerminating: a node's ready endpoints; when it has none, its
// serving terminating ones (KEP-1669); never a not-serving one or another node's.
func TestLocalEndpointsFallBackToTerminating(t *testing.T) {
	yes, no := true, false
	node, other := "c1-n1", "c1-n2"
	port, name := int32(8080), "http"
	ep := func(addr, on string, ready, serving, terminating *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: &on,
			Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
	}
	slice := func(eps ...discoveryv1.Endpoint) []discoveryv1.EndpointSlice {
		return []discoveryv1.EndpointSlice{{Endpoints: eps, Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}}}}
	}
	addrs := func(eps []LocalEndpoint) string {
		var out []string
		for _, e := range eps {
			out = append(out, e.Addr.String())
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		what  string
		eps   []discoveryv1.EndpointSlice
		local string
		ready bool
	}{
		{"ready first", slice(ep("10.16.0.2", node, &yes, &yes, &no), ep("10.16.0.3", node, &no, &yes, &yes), ep("10.16.0.4", other, &yes, nil, nil)), "10.16.0.2", true},
		{"unknown conditions read as ready", slice(ep("10.16.0.5", node, nil, nil, nil)), "10.16.0.5", true},
		{"no ready one: the serving terminating ones", slice(ep("10.16.0.3", node, &no, &yes, &yes), ep("10.16.0.6", node, &no, &no, &yes), ep("10.16.0.4", other, &yes, nil, nil)), "10.16.0.3", false},
		{"not ready, not terminating: none", slice(ep("10.16.0.7", node, &no, &no, &no)), "", false},
	} {
		eps, ready := localEndpoints(endpoints.FromSlices(c.eps), node)
		if got := addrs(eps); got != c.local || ready != c.ready {
			t.Errorf("%s: local endpoints %q (ready %t), want %q (%t)", c.what, got, ready, c.local, c.ready)
		}
	}
}

// A Service labelled for another proxy, or headless by label, gets no node rules.
func TestNodePortServiceSkipsOtherProxies(t *testing.T) {
	for _, label := range []string{"service.kubernetes.io/service-proxy-name", "service.kubernetes.io/headless"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np", Labels: map[string]string{label: "x"}},
			Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.30"}, Type: corev1.ServiceTypeNodePort,
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30090}}}}
		if s, ok := nodePortService(svc, nil, nil); ok {
			t.Errorf("labelled %s: kept %+v", label, s)
		}
		delete(svc.Labels, label)
		if _, ok := nodePortService(svc, nil, nil); !ok {
			t.Errorf("without %s: dropped", label)
		}
	}
}

// A dual-stack endpoint is one endpoint in two slices: the health check counts it once.
func TestEndpointCountCountsEndpointsNotAddresses(t *testing.T) {
	eps := []LocalEndpoint{{Addr: netip.MustParseAddr("10.16.0.2")}, {Addr: netip.MustParseAddr("fd00:10:16::2")},
		{Addr: netip.MustParseAddr("10.16.0.3")}, {Addr: netip.MustParseAddr("fd00:10:16::3")}}
	if n := endpointCount(eps); n != 2 {
		t.Errorf("2 dual-stack endpoints counted as %d", n)
	}
	if n := endpointCount(eps[2:3]); n != 1 {
		t.Errorf("1 IPv4-only endpoint counted as %d", n)
	}
}

// TestLocalPodPrefixes: the addresses of this node's pods (not another node's, not a node
// port's), both families, any subnet unless the filter says.
func TestLocalPodPrefixes(t *testing.T) {
	ip := func(pod, node, subnet, v4, v6 string) kovnv1.IP {
		return kovnv1.IP{Spec: kovnv1.IPSpec{PodName: pod, NodeName: node, Subnet: subnet, V4IP: v4, V6IP: v6}}
	}
	ips := []kovnv1.IP{ip("a", "n1", "ovn-default", "10.16.0.5", "fd00:10:16::5"), ip("b", "n2", "ovn-default", "10.16.0.6", ""),
		ip("c", "n1", "private", "10.20.0.7", ""), ip("", "n1", "ovn-default", "10.16.0.8", "")}
	got := fmt.Sprint(localPodPrefixes(ips, "n1", nil))
	if want := "[10.16.0.5/32 fd00:10:16::5/128 10.20.0.7/32]"; got != want {
		t.Errorf("local pods of n1 = %s, want %s", got, want)
	}
	got = fmt.Sprint(localPodPrefixes(ips, "n1", func(s string) bool { return s == "private" }))
	if want := "[10.20.0.7/32]"; got != want {
		t.Errorf("local pods of n1 in private = %s, want %s", got, want)
	}
}

// TestHostEndpoints: the node's own traffic to a ClusterIP is translated on the node only for a
// Service with a usable endpoint at this node's own (host network) address: over every usable
// endpoint, or this node's with internalTrafficPolicy=Local; other Services are left to OVN.
func TestHostEndpoints(t *testing.T) {
	pods := []netip.Prefix{netip.MustParsePrefix("10.16.0.0/16")}
	eps := []LocalEndpoint{
		{Addr: netip.MustParseAddr("172.30.1.11"), Ready: true, Serving: true, Node: "n1", Ports: map[string]int32{"http": 10180}},
		{Addr: netip.MustParseAddr("10.16.0.5"), Ready: true, Serving: true, Node: "n2", Ports: map[string]int32{"http": 10180}},
	}
	local := corev1.ServiceInternalTrafficPolicyLocal
	svc := func(itp *corev1.ServiceInternalTrafficPolicy) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.30", ClusterIPs: []string{"10.96.0.30"}, InternalTrafficPolicy: itp}}
	}
	cases := []struct {
		name string
		svc  *corev1.Service
		node string
		want string
	}{
		{"cluster policy, host endpoint here: every endpoint", svc(nil), "n1", "[172.30.1.11 10.16.0.5]"},
		{"cluster policy, no host endpoint here: OVN's", svc(nil), "n2", "[]"},
		{"local policy, host endpoint here: this node's", svc(&local), "n1", "[172.30.1.11]"},
		{"local policy, only a pod here: OVN's", svc(&local), "n2", "[]"},
	}
	for _, c := range cases {
		var got []string
		for _, e := range hostEndpoints(c.svc, eps, c.node, pods) {
			got = append(got, e.Addr.String())
		}
		if g := fmt.Sprint(got); g != c.want && !(c.want == "[]" && got == nil) {
			t.Errorf("%s: %s, want %s", c.name, g, c.want)
		}
	}
	s := NodePortService{Key: "ns/hn", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.30")},
		Ports: []NodePortPort{{Name: "http", Protocol: "TCP", Port: 80}}, HostEndpoints: eps[:1]}
	want := `-A KOVN-NODEPORTS -m addrtype --src-type LOCAL -d 10.96.0.30/32 -p tcp --dport 80 -m comment --comment "ns/hn:http" -j DNAT --to-destination 172.30.1.11:10180` + "\n"
	if v4 := NodePortRules(true, []NodePortService{s}, NodeSide{}); !strings.Contains(v4, want) {
		t.Errorf("IPv4 rules lack %q:\n%s", want, v4)
	}
	// Its NodePort too: spread over the endpoints by the node, masqueraded, not via the ClusterIP.
	s.Ports[0].NodePort = 30180
	v4 := NodePortRules(true, []NodePortService{s}, NodeSide{})
	np := `-A KOVN-NODEPORTS -m addrtype --dst-type LOCAL -p tcp --dport 30180 -m comment --comment "ns/hn:http"`
	for _, w := range []string{np + " -j MARK --set-xmark 0x4000/0x4000\n", np + " -j DNAT --to-destination 172.30.1.11:10180\n"} {
		if !strings.Contains(v4, w) {
			t.Errorf("IPv4 rules lack %q:\n%s", w, v4)
		}
	}
	if strings.Contains(v4, np+" -j DNAT --to-destination 10.96.0.30:80") {
		t.Errorf("the NodePort still goes through the ClusterIP:\n%s", v4)
	}
	// The node's own connections it sent to another node's host network leave masqueraded: their
	// source was ovn0's join address (the ClusterIP's route), which that node would answer
	// through its own ovn0 (Kubernetes' e2e "should function for service endpoints using
	// hostNetwork": the node never reached the other node's endpoint). One rule per family.
	side := NodeSide{Join: []netip.Prefix{netip.MustParsePrefix("100.64.0.1/16"), netip.MustParsePrefix("fd00:100:64::1/64")}}
	leave := "-A KOVN-NODEPORT-MASQ -s %s ! -o ovn0 -m addrtype --src-type LOCAL ! --dst-type LOCAL -m conntrack --ctstate DNAT -j MASQUERADE\n"
	for is4, w := range map[bool]string{true: fmt.Sprintf(leave, "100.64.0.0/16"), false: fmt.Sprintf(leave, "fd00:100:64::/64")} {
		if got := NodePortRules(is4, []NodePortService{s}, side); strings.Count(got, w) != 1 || strings.Count(got, "--ctstate DNAT -j MASQUERADE") != 2 {
			t.Errorf("is4 %v: the rules lack %q, or have it more than once:\n%s", is4, w, got)
		}
	}
}

// TestSyncOwnPodsOnlyOnChange: a family's set is synced on the first pass, again only when its
// addresses change (in any order), and again after a failed sync.
func TestSyncOwnPodsOnlyOnChange(t *testing.T) {
	var r NodePortReconciler
	var calls []bool
	fail := false
	sync := func(is4 bool, _ []netip.Addr) error {
		calls = append(calls, is4)
		if fail && is4 {
			return errors.New("netlink")
		}
		return nil
	}
	a := netip.MustParseAddr
	pass := func(addrs ...string) []bool {
		t.Helper()
		calls = nil
		var own []netip.Addr
		for _, s := range addrs {
			own = append(own, a(s))
		}
		_ = r.syncOwnPods(sync, own)
		return calls
	}
	steps := []struct {
		name  string
		fail  bool
		addrs []string
		want  []bool
	}{
		{"first pass syncs both", false, []string{"10.16.0.2", "fd00::2"}, []bool{true, false}},
		{"unchanged, reordered", false, []string{"fd00::2", "10.16.0.2"}, nil},
		{"a v4 pod more", false, []string{"10.16.0.2", "10.16.0.3", "fd00::2"}, []bool{true}},
		{"v4 sync fails", true, []string{"10.16.0.2", "fd00::2"}, []bool{true}},
		{"retried after the failure", false, []string{"10.16.0.2", "fd00::2"}, []bool{true}},
	}
	for _, s := range steps {
		fail = s.fail
		if got := pass(s.addrs...); !slices.Equal(got, s.want) {
			t.Errorf("%s: synced %v, want %v", s.name, got, s.want)
		}
	}
}

// TestNodePortRulesPeers: the node's own connections to another node's ETP=Local NodePort go
// to that node's endpoints (one rule per address of that node, spread evenly, unmasqueraded);
// a node whose endpoints lack the port, or a node without endpoints, gets no rule.
func TestNodePortRulesPeers(t *testing.T) {
	s := webLocal
	s.Peers = []PeerEndpoints{
		{Node: "n2", Endpoints: []LocalEndpoint{{Addr: netip.MustParseAddr("10.16.1.9"), Ports: map[string]int32{"http": 8080}},
			{Addr: netip.MustParseAddr("10.16.1.8"), Ports: map[string]int32{"http": 8080}}}},
		{Node: "n3", Endpoints: []LocalEndpoint{{Addr: netip.MustParseAddr("10.16.2.4"), Ports: map[string]int32{"http": 8080}}}},
	}
	side := NodeSide{PeerAddrs: map[string][]netip.Addr{"n2": addrList("172.30.1.12", "172.29.1.12", "fd00:30::12"), "n3": addrList("172.30.1.13")}}
	v4 := NodePortRules(true, []NodePortService{s}, side)
	peer := func(addr, node string) string {
		return fmt.Sprintf(`-A KOVN-NODEPORTS -m addrtype --src-type LOCAL -d %s/32 -p tcp --dport 30081 -m comment --comment "ns/local:http@%s"`, addr, node)
	}
	for _, want := range []string{
		peer("172.29.1.12", "n2") + " -m statistic --mode random --probability 0.50000 -j DNAT --to-destination 10.16.1.8:8080",
		peer("172.29.1.12", "n2") + " -j DNAT --to-destination 10.16.1.9:8080",
		peer("172.30.1.12", "n2") + " -m statistic --mode random --probability 0.50000 -j DNAT --to-destination 10.16.1.8:8080",
		peer("172.30.1.12", "n2") + " -j DNAT --to-destination 10.16.1.9:8080",
		peer("172.30.1.13", "n3") + " -j DNAT --to-destination 10.16.2.4:8080",
	} {
		if !strings.Contains(v4, want+"\n") {
			t.Errorf("IPv4 rules lack %q:\n%s", want, v4)
		}
	}
	if n := strings.Count(v4, "@n"); n != 5 || strings.Contains(v4, "30053 -m comment --comment \"ns/local:dns@") {
		t.Errorf("%d peer rules, want 5 (none for the UDP port no endpoint has):\n%s", n, v4)
	}
	if strings.Contains(v4, "fd00") || strings.Contains(NodePortRules(false, []NodePortService{s}, side), "@n2") {
		t.Errorf("a peer address of the other family has a rule")
	}
	s.LocalOnly = false
	if v4 := NodePortRules(true, []NodePortService{s}, side); strings.Contains(v4, "@n2") {
		t.Errorf("an ETP=Cluster Service has peer rules:\n%s", v4)
	}
}

// TestPeerEndpoints: every other node's endpoints that take new connections, as that node
// chooses its own (ready, else serving terminating), by node; the own node and nodes with none
// are left out.
func TestPeerEndpoints(t *testing.T) {
	ep := func(addr, node string, ready, serving, terminating bool) LocalEndpoint {
		return LocalEndpoint{Addr: netip.MustParseAddr(addr), Node: node, Ready: ready, Serving: serving, Terminating: terminating}
	}
	eps := []LocalEndpoint{
		ep("10.16.0.1", "n1", true, true, false),   // own
		ep("10.16.1.1", "n2", true, true, false),   // ready
		ep("10.16.1.2", "n2", false, true, true),   // terminating beside a ready one: not used
		ep("10.16.2.1", "n3", false, true, true),   // only terminating ones: used
		ep("10.16.3.1", "n4", false, false, false), // not serving
		ep("10.16.4.1", "", true, true, false),     // no node
	}
	var got []string
	for _, p := range peerEndpoints(eps, "n1") {
		for _, e := range p.Endpoints {
			got = append(got, p.Node+"="+e.Addr.String())
		}
	}
	if g, want := strings.Join(got, " "), "n2=10.16.1.1 n3=10.16.2.1"; g != want {
		t.Errorf("peer endpoints %q, want %q", g, want)
	}
}

// TestNodeAddressesOnly: the Node cache keeps a Node's name and addresses, nothing else.
func TestNodeAddressesOnly(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"a": "b"}, ResourceVersion: "7"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.1.12"}},
			Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	out, err := nodeAddressesOnly(n)
	got, ok := out.(*corev1.Node)
	if err != nil || !ok || got.Name != "n2" || got.ResourceVersion != "7" || len(got.Labels) != 0 || len(got.Status.Images) != 0 ||
		len(got.Status.Addresses) != 1 || got.Status.Addresses[0].Address != "172.30.1.12" {
		t.Fatalf("nodeAddressesOnly = %+v, %v", out, err)
	}
	if tomb, _ := nodeAddressesOnly("tombstone"); tomb != "tombstone" {
		t.Errorf("a tombstone was changed: %v", tomb)
	}
}

// TestForwardedIntoOverlayTakesMasqAddress: connections the node forwards into the overlay for
// someone else (marked NodePort and hostPort traffic, anything routed in from outside) leave
// with the node's masquerade address of their family, which no ACL admits by itself; ovn0's
// own join address (MASQUERADE) would pass every pod's policy on this node as the node. The
// rules are applied for real, each family with its own address.
func TestForwardedIntoOverlayTakesMasqAddress(t *testing.T) {
	masq := addrList("100.64.0.9", "fd00:100:64::9")
	side := NodeSide{Masq: masq, Join: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd00:100:64::/64")}}
	netnstest.Do(t, func() {
		for i, is4 := range []bool{true, false} {
			tool := map[bool]string{true: "iptables", false: "ip6tables"}[is4]
			if err := SyncOwnPodsSet(is4, nil); err != nil {
				t.Fatal(err)
			}
			if err := ApplyNodePortRules(is4, NodePortRules(is4, []NodePortService{webCluster}, side)); err != nil {
				t.Fatal(err)
			}
			if err := ApplyHostPortRules(is4, HostPortRules(is4, []HostPortMapping{hpTCP}, masq)); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(tool, "-t", "nat", "-S").CombinedOutput()
			if err != nil {
				t.Fatalf("%s -S: %v %s", tool, err, out)
			}
			s, to := string(out), "-j SNAT --to-source "+masq[i].String()
			for _, want := range []string{
				"-A KOVN-NODEPORT-MASQ -o ovn0 -m mark --mark 0x4000/0x4000 " + to,
				"-A KOVN-HOSTPORT-MASQ -o ovn0 -m mark --mark 0x4000/0x4000 " + to,
				"-A KOVN-NODEPORT-MASQ -o ovn0 -m addrtype ! --src-type LOCAL -m conntrack ! --ctstate DNAT " + to,
			} {
				if !strings.Contains(s, want+"\n") {
					t.Errorf("%s lacks %q:\n%s", tool, want, s)
				}
			}
			if strings.Contains(s, "-o ovn0 -m addrtype ! --src-type LOCAL -m conntrack ! --ctstate DNAT -j MASQUERADE") {
				t.Errorf("%s: traffic routed in from outside still masqueraded to ovn0's own address:\n%s", tool, s)
			}
		}
	})
}
