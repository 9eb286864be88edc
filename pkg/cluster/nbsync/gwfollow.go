package nbsync

import (
	"context"
	"slices"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// FollowGateway points a centralized subnet's reroute policies at node, the gateway node OVN
// bound the subnet's health port to, using only what the subnet's shard wrote in NB (the
// join addresses in topology.GatewayHopsKey). It changes nothing when node is not one of the
// subnet's gateway nodes or the policies already point at it, and returns the operations sent.
//
// Every kovn-controller replica calls it on a binding change, not only the leader: when the
// gateway that lost its link runs the leader, the standby moves the egress at once instead of
// after the lease expires. It writes what the leader's next reconcile of the subnet writes
// too, from the same SB verdict, so the two never disagree for longer than SB takes to reach
// both.
func FollowGateway(ctx context.Context, c client.Client, subnet, node string) (int, error) {
	probe := &nb.LogicalRouterPolicy{ExternalIDs: map[string]string{ovn.OwnerKey: subnet}}
	rows, err := ownedRows(ctx, c, probe, topology.OwnerSubnet, subnet)
	if err != nil {
		return 0, err
	}
	var ops []ovsdb.Operation
	for _, p := range rows {
		if p.Priority != topology.PriorityCentralGateway || p.Action != nb.LogicalRouterPolicyActionReroute {
			continue
		}
		hop, ok := topology.GatewayHop(p.ExternalIDs[topology.GatewayHopsKey], node)
		if !ok || slices.Equal(p.Nexthops, []string{hop}) {
			continue
		}
		m := &nb.LogicalRouterPolicy{UUID: p.UUID, Nexthops: []string{hop}}
		op, err := c.Where(m).Update(m, &m.Nexthops)
		if err != nil {
			return 0, err
		}
		ops = append(ops, op...)
	}
	if len(ops) == 0 {
		return 0, nil
	}
	_, err = ovn.Transact(ctx, c, ops)
	return len(ops), err
}
