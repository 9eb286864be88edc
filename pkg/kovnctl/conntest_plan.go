package kovnctl

import (
	"fmt"
	"net"
	"strconv"

	"github.com/kovn/kovn/pkg/kovnctl/probe"
)

// Connectivity-test objects, in every cluster tested.
const (
	TestNamespace = "kovn-connectivity-test"
	TestService   = "echo"
	TestPort      = probe.Port
)

// ServerPod is a running echo server.
type ServerPod struct {
	Name, Node string
	IPs        []string
}

// ClusterView is what the plan needs of one cluster: its servers, the echo Service's
// ClusterIPs, the ServiceImport's ClusterSetIPs (none without MCS) and the client pods' nodes.
type ClusterView struct {
	Name          string
	Servers       []ServerPod
	ServiceIPs    []string
	ClusterSetIPs []string
	MCS           bool // the echo Service is exported in every cluster tested
	ClientNodes   []string
}

// ClientName is the client pod on node.
func ClientName(node string) string { return "client-" + node }

// ServerName is the echo server pod on node.
func ServerName(node string) string { return "server-" + node }

func url(host string) string { return "http://" + net.JoinHostPort(host, strconv.Itoa(TestPort)) + "/" }

// Plan lists the checks of each client pod, by cluster and node: every server pod of every
// cluster in each family (same node, other node, cross-cluster), the cluster's Service by
// ClusterIP and by name, and with MCS each ClusterSetIP (a backend of every cluster must
// answer) and the clusterset.local name.
func Plan(clusters []ClusterView) map[string]map[string][]probe.Target {
	plan := map[string]map[string][]probe.Target{}
	var everyServer, everyCluster []string
	for _, c := range clusters {
		everyCluster = append(everyCluster, c.Name)
		for _, s := range c.Servers {
			everyServer = append(everyServer, c.Name+"/"+s.Name)
		}
	}
	for _, c := range clusters {
		plan[c.Name] = map[string][]probe.Target{}
		var local []string
		for _, s := range c.Servers {
			local = append(local, c.Name+"/"+s.Name)
		}
		for _, node := range c.ClientNodes {
			var ts []probe.Target
			for _, other := range clusters {
				for _, s := range other.Servers {
					kind := "pod-to-pod (cross-cluster)"
					switch {
					case other.Name == c.Name && s.Node == node:
						kind = "pod-to-pod (same node)"
					case other.Name == c.Name:
						kind = "pod-to-pod (other node)"
					}
					for _, ip := range s.IPs {
						ts = append(ts, probe.Target{Check: kind, To: fmt.Sprintf("%s/%s %s", other.Name, s.Name, ip), URL: url(ip),
							Expect: []string{other.Name + "/" + s.Name}})
					}
				}
			}
			for _, ip := range c.ServiceIPs {
				ts = append(ts, probe.Target{Check: "pod-to-Service", To: fmt.Sprintf("%s/%s %s", c.Name, TestService, ip), URL: url(ip), Expect: local})
			}
			name := TestService + "." + TestNamespace + ".svc.cluster.local"
			ts = append(ts, probe.Target{Check: "DNS", To: name, URL: url(name), Expect: local})
			if c.MCS {
				for _, ip := range c.ClusterSetIPs {
					ts = append(ts, probe.Target{Check: "pod-to-ClusterSetIP", To: fmt.Sprintf("ServiceImport %s %s", TestService, ip), URL: url(ip),
						Expect: everyServer, EachCluster: everyCluster})
				}
				name := TestService + "." + TestNamespace + ".svc.clusterset.local"
				ts = append(ts, probe.Target{Check: "DNS (clusterset)", To: name, URL: url(name), Expect: everyServer, EachCluster: everyCluster})
			}
			plan[c.Name][node] = ts
		}
	}
	return plan
}
