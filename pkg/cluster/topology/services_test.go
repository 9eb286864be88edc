package topology

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func ep(addr string, ready, serving, terminating bool, ports map[string]int32) EndpointIn {
	return EndpointIn{Addr: netip.MustParseAddr(addr), Ready: ready, Serving: serving, Terminating: terminating, Ports: ports}
}

// TestForServiceDualStackPortsAndProtocols: one LB per protocol; every VIP (both families) and
// port maps to the ready endpoints of its own family; a named targetPort resolves per endpoint.
func TestForServiceDualStackPortsAndProtocols(t *testing.T) {
	s := ServiceIn{Namespace: "ns", Name: "web", VIPs: addrs("10.96.0.10", "fd00:10:96::a"),
		Ports: []ServicePortIn{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}},
		Endpoints: []EndpointIn{
			ep("10.16.0.5", true, true, false, map[string]int32{"http": 8080, "dns": 5353}),
			ep("fd00:10:16::5", true, true, false, map[string]int32{"http": 8080, "dns": 5353}),
			// Another slice: this pod names "http" as 9090 (rolling update to a new port).
			ep("10.16.0.6", true, true, false, map[string]int32{"http": 9090}),
			ep("10.16.0.7", false, false, false, map[string]int32{"http": 8080}), // not ready: left out
		}}
	sh := ForService(s)
	if sh.OwnerType != OwnerService || sh.Owner != "ns/web" || len(sh.LoadBalancers) != 2 {
		t.Fatalf("shard %+v", sh)
	}
	tcp, udp := sh.LoadBalancers[0], sh.LoadBalancers[1]
	if tcp.Name != "Service_ns/web_TCP" || tcp.Protocol != "tcp" || udp.Name != "Service_ns/web_UDP" || udp.Protocol != "udp" {
		t.Fatalf("names/protocols: %s %s %s %s", tcp.Name, tcp.Protocol, udp.Name, udp.Protocol)
	}
	wantTCP := map[string]string{"10.96.0.10:80": "10.16.0.5:8080,10.16.0.6:9090", "[fd00:10:96::a]:80": "[fd00:10:16::5]:8080"}
	if !reflect.DeepEqual(tcp.VIPs, wantTCP) {
		t.Errorf("TCP VIPs %v, want %v", tcp.VIPs, wantTCP)
	}
	wantUDP := map[string]string{"10.96.0.10:53": "10.16.0.5:5353", "[fd00:10:96::a]:53": "[fd00:10:16::5]:5353"}
	if !reflect.DeepEqual(udp.VIPs, wantUDP) {
		t.Errorf("UDP VIPs %v, want %v", udp.VIPs, wantUDP)
	}
	if tcp.Options["reject"] != "true" || !reflect.DeepEqual(tcp.Groups, []string{ClusterLBGroup}) {
		t.Errorf("options %v groups %v", tcp.Options, tcp.Groups)
	}
	// UDP flows are flushed off a backend that leaves; TCP connections finish on it.
	if udp.Options["ct_flush"] != "true" || tcp.Options["ct_flush"] != "" {
		t.Errorf("ct_flush: TCP %q, UDP %q; want none and true", tcp.Options["ct_flush"], udp.Options["ct_flush"])
	}
	if _, ok := tcp.Options["affinity_timeout"]; ok {
		t.Errorf("affinity without sessionAffinity: %v", tcp.Options)
	}
}

// TestForServiceEndpointSelection: terminating endpoints serve only while no endpoint is ready;
// no usable endpoint leaves the VIP with no backend (OVN rejects), never drops it.
func TestForServiceEndpointSelection(t *testing.T) {
	base := ServiceIn{Namespace: "ns", Name: "s", VIPs: addrs("10.96.0.11"), Ports: []ServicePortIn{{Protocol: "TCP", Port: 80}}}
	term := ep("10.16.0.8", false, true, true, map[string]int32{"": 80})
	gone := ep("10.16.0.9", false, false, true, map[string]int32{"": 80}) // terminating, not serving
	for _, c := range []struct {
		name string
		eps  []EndpointIn
		want string
	}{
		{"ready wins over terminating", []EndpointIn{term, ep("10.16.0.5", true, true, false, map[string]int32{"": 80})}, "10.16.0.5:80"},
		{"only terminating: serving ones take traffic", []EndpointIn{term, gone}, "10.16.0.8:80"},
		{"nothing usable: no backend", []EndpointIn{gone}, ""},
		{"no endpoints at all", nil, ""},
	} {
		s := base
		s.Endpoints = c.eps
		lbs := ForService(s).LoadBalancers
		if len(lbs) != 1 {
			t.Fatalf("%s: %d LBs", c.name, len(lbs))
		}
		if got, ok := lbs[0].VIPs["10.96.0.11:80"]; !ok || got != c.want {
			t.Errorf("%s: backends %q (present %t), want %q", c.name, got, ok, c.want)
		}
	}
}

func TestForServiceAffinityTimeout(t *testing.T) {
	s := ServiceIn{Namespace: "ns", Name: "s", VIPs: addrs("10.96.0.12"), Ports: []ServicePortIn{{Protocol: "SCTP", Port: 7}},
		AffinityTimeout: 86400}
	lb := ForService(s).LoadBalancers[0]
	if lb.Protocol != "sctp" || lb.Options["affinity_timeout"] != "65535" {
		t.Fatalf("SCTP LB %+v: want affinity capped at OVN's 65535 s", lb)
	}
	s.AffinityTimeout = 10800
	if got := ForService(s).LoadBalancers[0].Options["affinity_timeout"]; got != "10800" {
		t.Fatalf("affinity_timeout %q, want 10800", got)
	}
}

// TestForServiceStable: the same input renders the same shard whatever the endpoint order, so
// an unchanged Service costs no transaction.
func TestForServiceStable(t *testing.T) {
	a := ep("10.16.0.5", true, true, false, map[string]int32{"": 80})
	b := ep("10.16.0.6", true, true, false, map[string]int32{"": 80})
	s := ServiceIn{Namespace: "ns", Name: "s", VIPs: addrs("10.96.0.13"), Ports: []ServicePortIn{{Protocol: "TCP", Port: 80}}}
	s.Endpoints = []EndpointIn{a, b}
	x := ForService(s)
	s.Endpoints = []EndpointIn{b, a, a} // a twice: in two slices while it moves
	if y := ForService(s); !reflect.DeepEqual(x, y) {
		t.Fatalf("order changed the shard:\n%+v\n%+v", x, y)
	}
}

// TestForServiceInternalLocal: the ClusterIPs move to one template LB per protocol and family,
// each VIP backed by a variable that every chassis defines as its own node's endpoints (empty
// without one); external IPs stay cluster-wide.
func TestForServiceInternalLocal(t *testing.T) {
	n1 := ep("10.16.0.5", true, true, false, map[string]int32{"http": 8080})
	n1.Node = "n1"
	n1v6 := ep("fd00:10:16::5", true, true, false, map[string]int32{"http": 8080})
	n1v6.Node = "n1"
	n2 := ep("10.16.0.6", true, true, false, map[string]int32{"http": 8080})
	n2.Node = "n2"
	s := ServiceIn{Namespace: "ns", Name: "loc", VIPs: addrs("10.96.0.10", "fd00:10:96::a", "198.51.100.1"), NClusterIPs: 2,
		InternalLocal: true, Chassis: []string{"n1", "n2", "n3"},
		Ports:     []ServicePortIn{{Name: "http", Protocol: "TCP", Port: 80}},
		Endpoints: []EndpointIn{n1, n1v6, n2}}
	sh := ForService(s)
	var names []string
	for _, lb := range sh.LoadBalancers {
		names = append(names, lb.Name)
	}
	want := []string{"Service_ns/loc_TCP", "Service_ns/loc_TCP_local_ipv4", "Service_ns/loc_TCP_local_ipv6"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("LBs %v, want %v", names, want)
	}
	if got := sh.LoadBalancers[0].VIPs; !reflect.DeepEqual(got, map[string]string{"198.51.100.1:80": "10.16.0.5:8080,10.16.0.6:8080"}) {
		t.Errorf("cluster-wide LB VIPs %v: only the external IP, to every endpoint", got)
	}
	v4, v6 := sh.LoadBalancers[1], sh.LoadBalancers[2]
	if v4.Options["template"] != "true" || v4.Options["address-family"] != "ipv4" || v6.Options["address-family"] != "ipv6" || v4.Options["reject"] != "true" {
		t.Errorf("template options %v %v", v4.Options, v6.Options)
	}
	// OVN splits template VIP keys at ':': an IPv6 VIP is itself a variable.
	var vip6 string
	for k := range v6.VIPs {
		vip6 = k
	}
	prefix := "^" + TemplateVarPrefix(OwnerService, "ns/loc")
	var4, var6 := v4.VIPs["10.96.0.10:80"], v6.VIPs[vip6]
	if len(v4.VIPs) != 1 || len(v6.VIPs) != 1 || !strings.HasPrefix(var4, prefix) || !strings.HasPrefix(var6, prefix) ||
		var4 == var6 || !strings.HasPrefix(vip6, prefix) || !strings.HasSuffix(vip6, ":80") || strings.Count(vip6, ":") != 1 {
		t.Fatalf("template VIPs %v %v", v4.VIPs, v6.VIPs)
	}
	vipVar := strings.TrimSuffix(vip6[1:], ":80")
	wantVars := map[string]map[string]string{
		"n1": {var4[1:]: "10.16.0.5:8080", var6[1:]: "[fd00:10:16::5]:8080", vipVar: "fd00:10:96::a"},
		"n2": {var4[1:]: "10.16.0.6:8080", var6[1:]: "", vipVar: "fd00:10:96::a"},
		"n3": {var4[1:]: "", var6[1:]: "", vipVar: "fd00:10:96::a"},
	}
	if !reflect.DeepEqual(sh.TemplateVars, wantVars) {
		t.Errorf("template vars %v, want %v", sh.TemplateVars, wantVars)
	}
	if TemplateVarPrefix("Pod", "ns/a") != "" {
		t.Error("only Services define template variables")
	}
}
