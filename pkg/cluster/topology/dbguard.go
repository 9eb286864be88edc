package topology

import "fmt"

// OVN's database ports, which pods may not open outside the clusterset's subnets: NB 6641, SB
// 6642, their raft ports 6643 and 6644, IC-NB 6645, IC-SB 6646 (kovn's OVN_ClusterSet with
// it), the IC raft ports 6647 and 6648 and OVN_ClusterSet's raft port 6649.
const (
	OVNDBPortFirst = 6641
	OVNDBPortLast  = 6649
)

// Priorities of the database guard on the default VPC's router. Router policies see a
// connection after a switch's load balancer translated it, so a Service or EndpointSlice
// pointing at a database port is dropped too.
const (
	// PriorityDBGuardNodes is above PriorityAllowCluster: the join subnet is a cluster subnet,
	// but its addresses are the nodes' own (ovn0).
	PriorityDBGuardNodes = 31100
	// PriorityDBGuard is below PriorityAllowCluster (pods and the clusterset's subnets keep
	// every port) and above every way out (PriorityForeignAZ and the reroutes through nodes):
	// node, control-plane and outside addresses.
	PriorityDBGuard = 30950
)

// dbGuard are the join subnet's router policies that drop TCP from the pod network to OVN's
// database ports of the nodes (their join addresses, and anything outside the clusterset's
// subnets: their own addresses, the control plane, the IC databases). The databases are for
// ovn-controller, kovn and kubectl-kovn on the host network, whose traffic never crosses this
// router; a pod that opens one could rewrite the cluster's (or clusterset's) network while
// the databases accept clients without certificates, and must not even reach them after.
func dbGuard(join SubnetIn) []Policy {
	ports := fmt.Sprintf("tcp.dst >= %d && tcp.dst <= %d", OVNDBPortFirst, OVNDBPortLast)
	out := []Policy{{Router: join.Vpc, Priority: PriorityDBGuard, Action: "drop", Match: "tcp && " + ports}}
	for _, c := range join.CIDRs {
		out = append(out, Policy{Router: join.Vpc, Priority: PriorityDBGuardNodes, Action: "drop",
			Match: fmt.Sprintf("%s.dst == %s && %s", family(c.Addr()), c.Masked(), ports)})
	}
	return out
}
