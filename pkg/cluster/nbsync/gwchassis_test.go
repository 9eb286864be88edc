package nbsync

import (
	"slices"
	"testing"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// gwShard is a shard with one gateway router port on ovn-cluster bound to chassis with
// priorities.
func gwShard(gcs ...topology.GatewayChassis) topology.Shard {
	return topology.Shard{OwnerType: "InterConnect", Owner: "default", RouterPorts: []topology.RouterPort{{
		Router: "ovn-cluster", Name: "ts-az1", MAC: "0a:58:a9:fe:64:01", Networks: []string{"169.254.100.1/24"}, GatewayChassis: gcs}}}
}

func lrpChassis(t *testing.T, port string, rows []nb.GatewayChassis, lrp nb.LogicalRouterPort) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range rows {
		if slices.Contains(lrp.GatewayChassis, r.UUID) {
			out[r.ChassisName] = r.Priority
		}
	}
	return out
}

// TestGatewayChassis: a gateway port is created with its chassis and priorities; swapping the
// priorities updates the two rows in place (same UUIDs, the port untouched: BFD sessions stay
// up); a chassis replaced rewrites the port's list; re-applying sends nothing.
func TestGatewayChassis(t *testing.T) {
	c := connect(t)
	base(t, c)
	apply(t, c, gwShard(topology.GatewayChassis{Chassis: "n1", Priority: 100}, topology.GatewayChassis{Chassis: "n2", Priority: 99}))
	lrp := lrpNamed(t, c, "ts-az1")
	if got := lrpChassis(t, "ts-az1", list[nb.GatewayChassis](t, c), lrp); len(got) != 2 || got["n1"] != 100 || got["n2"] != 99 {
		t.Fatalf("created: %v", got)
	}
	before := slices.Sorted(slices.Values(lrp.GatewayChassis))
	swapped := gwShard(topology.GatewayChassis{Chassis: "n1", Priority: 99}, topology.GatewayChassis{Chassis: "n2", Priority: 100})
	if got := settled(t, c, swapped); !slices.Equal(got, []string{"update Gateway_Chassis", "update Gateway_Chassis"}) {
		t.Errorf("priorities swapped: %v, want two in-place updates", got)
	}
	lrp = lrpNamed(t, c, "ts-az1")
	if got := lrpChassis(t, "ts-az1", list[nb.GatewayChassis](t, c), lrp); got["n1"] != 99 || got["n2"] != 100 ||
		!slices.Equal(slices.Sorted(slices.Values(lrp.GatewayChassis)), before) {
		t.Errorf("after swap: %v, rows %v (before %v)", got, lrp.GatewayChassis, before)
	}
	replaced := gwShard(topology.GatewayChassis{Chassis: "n1", Priority: 99}, topology.GatewayChassis{Chassis: "n3", Priority: 100})
	if got := settled(t, c, replaced); !slices.Equal(got, []string{"insert Gateway_Chassis", "update Logical_Router_Port"}) {
		t.Errorf("n2 replaced by n3: %v", got)
	}
	lrp = lrpNamed(t, c, "ts-az1")
	if got := lrpChassis(t, "ts-az1", list[nb.GatewayChassis](t, c), lrp); len(got) != 2 || got["n3"] != 100 || got["n1"] != 99 {
		t.Errorf("after replace: %v", got)
	}
	if n := apply(t, c, replaced); n != 0 {
		t.Errorf("re-apply sent %d operations", n)
	}
}
