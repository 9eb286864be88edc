package cleanup

import (
	"net/netip"

	"github.com/kovn/kovn/pkg/node/nodetest"
	"github.com/kovn/kovn/pkg/node/servicenat"
)

// prefixes is the node side's shared test fixture.
var prefixes = nodetest.Prefixes

// Services and a hostPort the way kovn-daemon programs them, for a node to clean up.
var (
	webCluster = servicenat.NodePortService{Key: "ns/web", ClusterIPs: addrList("10.96.0.20", "fd00:10:96::14"),
		ExternalIPs: addrList("172.30.200.1"), Ports: []servicenat.NodePortPort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}}}
	webLocal = servicenat.NodePortService{Key: "ns/local", ClusterIPs: addrList("10.96.0.21"), LocalOnly: true,
		Ports: []servicenat.NodePortPort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30081}, {Name: "dns", Protocol: "UDP", Port: 53, NodePort: 30053}},
		LocalEndpoints: []servicenat.LocalEndpoint{{Addr: netip.MustParseAddr("10.16.0.7"), Ports: map[string]int32{"http": 8080}},
			{Addr: netip.MustParseAddr("10.16.0.5"), Ports: map[string]int32{"http": 8080}}}}
	hpTCP = servicenat.HostPortMapping{Key: "ns/tcp", Protocol: "TCP", HostPort: 8080, ContainerPort: 8080,
		PodIPs: addrList("10.16.0.5", "fd00:10:16::5")}
)

func addrList(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
