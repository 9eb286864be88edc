package topology

import (
	"reflect"
	"testing"
)

// The join subnet's shard drops TCP to OVN's database ports at the nodes' join addresses
// (above the allow of cluster subnets) and everywhere outside the clusterset's subnets (below
// it, above every way out); no other subnet's shard carries the guard.
func TestDBGuard(t *testing.T) {
	sh := ForSubnet(joinIn, &joinIn, nil)
	const ports = "tcp.dst >= 6641 && tcp.dst <= 6649"
	want := []Policy{
		{Router: "ovn-cluster", Priority: PriorityDBGuardNodes, Action: "drop", Match: "ip4.dst == 100.64.0.0/16 && " + ports},
		{Router: "ovn-cluster", Priority: PriorityDBGuardNodes, Action: "drop", Match: "ip6.dst == fd00:100:64::/112 && " + ports},
		{Router: "ovn-cluster", Priority: PriorityAllowCluster, Action: "allow", Match: "ip4.dst == 100.64.0.0/16"},
		{Router: "ovn-cluster", Priority: PriorityAllowCluster, Action: "allow", Match: "ip6.dst == fd00:100:64::/112"},
		{Router: "ovn-cluster", Priority: PriorityDBGuard, Action: "drop", Match: "tcp && " + ports},
	}
	if !reflect.DeepEqual(sh.Policies, want) {
		t.Errorf("join subnet's policies:\n%+v\nwant\n%+v", sh.Policies, want)
	}
	if !(PriorityDBGuardNodes > PriorityAllowCluster && PriorityAllowCluster > PriorityDBGuard && PriorityDBGuard > PriorityForeignAZ &&
		PriorityForeignAZ > PriorityNodeReroute) {
		t.Errorf("guard priorities out of order")
	}
	for _, s := range []SubnetIn{defaultIn, centralIn, customIn} {
		for _, p := range ForSubnet(s, &joinIn, nodesIn).Policies {
			if p.Action == "drop" {
				t.Errorf("subnet %s carries %+v", s.Name, p)
			}
		}
	}
}
