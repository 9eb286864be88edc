package nbsync

import (
	"context"

	"github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Owner identifies the Kubernetes object a shard belongs to.
type Owner struct{ Type, Key string }

// Owners returns every owner with rows written by this writer. It scans whole tables: it is
// for garbage collection at start-up and on a slow resync, never for a single event.
func Owners(ctx context.Context, c client.Client) (map[Owner]bool, error) {
	out := map[Owner]bool{}
	add := func(ids map[string]string) {
		t, o, ok := ovn.OwnerOf(ids)
		if ok && Owned(ids, t, o) && topologyType(t) {
			out[Owner{t, o}] = true
		}
		if ok && t == topology.OwnerPolicyPeer && Owned(ids, t, o) {
			// A shared set's users own it together: a deleted one is released by its shard.
			for _, u := range usersOf(ids) {
				if topologyType(u.Type) {
					out[u] = true
				}
			}
		}
	}
	for _, scan := range []func(context.Context, client.Client, func(map[string]string)) error{
		scanIDs[nb.LogicalSwitch], scanIDs[nb.LogicalSwitchPort], scanIDs[nb.LogicalRouter], scanIDs[nb.LogicalRouterPort],
		scanIDs[nb.LogicalRouterPolicy], scanIDs[nb.LogicalRouterStaticRoute], scanIDs[nb.PortGroup], scanIDs[nb.LoadBalancer],
		scanIDs[nb.ACL], scanIDs[nb.AddressSet], scanIDs[nb.QoS], scanIDs[nb.NAT],
	} {
		if err := scan(ctx, c, add); err != nil {
			return nil, err
		}
	}
	// Load_Balancer_Group rows carry no external_ids: their owners are recorded in NB_Global's.
	err := scanIDs[nb.NBGlobal](ctx, c, func(ids map[string]string) {
		for k := range ids {
			if o, ok := ownedGroupsOwner(k); ok && topologyType(o.Type) {
				out[o] = true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanIDs calls f with the external_ids of every cached row of T's table.
func scanIDs[T any](ctx context.Context, c client.Client, f func(map[string]string)) error {
	var rows []*T
	if err := c.List(ctx, &rows); err != nil {
		return err
	}
	for _, r := range rows {
		f(ovn.ExternalIDs(r))
	}
	return nil
}

func topologyType(t string) bool {
	switch t {
	case topology.OwnerVpc, topology.OwnerSubnet, topology.OwnerNode, topology.OwnerPod, topology.OwnerService,
		topology.OwnerNetworkPolicy, topology.OwnerFloatingIP, topology.OwnerForeignAZ, topology.OwnerClusterNetworkPolicy,
		topology.OwnerMultiNetworkPolicy:
		return true
	}
	return false
}
