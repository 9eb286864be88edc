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
		if !ok || !Owned(ids, t, o) || !topologyType(t) {
			return
		}
		out[Owner{t, o}] = true
	}
	var lss []nb.LogicalSwitch
	var lsps []nb.LogicalSwitchPort
	var lrs []nb.LogicalRouter
	var lrps []nb.LogicalRouterPort
	var pols []nb.LogicalRouterPolicy
	var routes []nb.LogicalRouterStaticRoute
	var pgs []nb.PortGroup
	for _, l := range []any{&lss, &lsps, &lrs, &lrps, &pols, &routes, &pgs} {
		if err := c.List(ctx, l); err != nil {
			return nil, err
		}
	}
	for i := range lss {
		add(lss[i].ExternalIDs)
	}
	for i := range lsps {
		add(lsps[i].ExternalIDs)
	}
	for i := range lrs {
		add(lrs[i].ExternalIDs)
	}
	for i := range lrps {
		add(lrps[i].ExternalIDs)
	}
	for i := range pols {
		add(pols[i].ExternalIDs)
	}
	for i := range routes {
		add(routes[i].ExternalIDs)
	}
	for i := range pgs {
		add(pgs[i].ExternalIDs)
	}
	return out, nil
}

func topologyType(t string) bool {
	switch t {
	case topology.OwnerVpc, topology.OwnerSubnet, topology.OwnerNode, topology.OwnerPod:
		return true
	}
	return false
}
