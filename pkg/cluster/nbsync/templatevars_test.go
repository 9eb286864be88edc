package nbsync

import (
	"testing"

	"github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

func varsShard(owner string, vars map[string]map[string]string) topology.Shard {
	return topology.Shard{OwnerType: topology.OwnerService, Owner: owner, TemplateVars: vars}
}

func chassisVars(t *testing.T, c client.Client) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, r := range list[nb.ChassisTemplateVar](t, c) {
		out[r.Chassis] = r.Variables
	}
	return out
}

// Two Services share each chassis row; each owns only its own variables: it updates them,
// removes them when it no longer wants them or is gone, and an unchanged shard costs nothing.
func TestTemplateVarsSharedRows(t *testing.T) {
	c := connect(t)
	pa, pb := topology.TemplateVarPrefix(topology.OwnerService, "ns/a"), topology.TemplateVarPrefix(topology.OwnerService, "ns/b")
	a1 := varsShard("ns/a", map[string]map[string]string{"n1": {pa + "x": "10.16.0.5:80"}, "n2": {pa + "x": ""}})
	apply(t, c, a1)
	apply(t, c, varsShard("ns/b", map[string]map[string]string{"n1": {pb + "y": "10.16.0.7:53"}}))
	var got map[string]map[string]string
	waitFor(t, func() bool {
		got = chassisVars(t, c)
		return len(got) == 2 && got["n1"][pa+"x"] == "10.16.0.5:80" && got["n1"][pb+"y"] == "10.16.0.7:53" &&
			len(got["n2"]) == 1 && got["n2"][pa+"x"] == ""
	})
	if n := apply(t, c, a1); n != 0 {
		t.Errorf("unchanged shard sent %d operations", n)
	}
	apply(t, c, varsShard("ns/a", map[string]map[string]string{"n1": {pa + "x": "10.16.0.6:80"}}))
	waitFor(t, func() bool {
		got = chassisVars(t, c)
		_, stale := got["n2"][pa+"x"]
		return got["n1"][pa+"x"] == "10.16.0.6:80" && !stale && got["n1"][pb+"y"] == "10.16.0.7:53"
	})
	apply(t, c, topology.Shard{OwnerType: topology.OwnerService, Owner: "ns/a"}) // Service deleted
	waitFor(t, func() bool {
		got = chassisVars(t, c)
		return len(got["n1"]) == 1 && got["n1"][pb+"y"] == "10.16.0.7:53" && len(got["n2"]) == 0
	})
}
