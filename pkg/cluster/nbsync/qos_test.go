package nbsync

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// TestPodQoS: a pod's limits become QoS rows on its switch (beside another writer's), a
// changed rate updates its row in place and costs one operation, a lifted limit deletes its
// row and unlists it, and the pod's deletion takes the rest.
func TestPodQoS(t *testing.T) {
	c := connect(t)
	base(t, c)
	ls := lsNamed(t, c, def.Switch)
	admin := &nb.QoS{UUID: "admin", Direction: "from-lport", Priority: 10, Match: "ip4", Action: map[string]int{"dscp": 8}}
	transact(t, c, []model.Model{admin}, func() []ovsdb.Operation {
		return []ovsdb.Operation{refMutation("Logical_Switch", ls.UUID, "qos_rules", ovsdb.MutateOperationInsert, "admin")}
	}, func() bool { return len(lsNamed(t, c, def.Switch).QOSRules) == 1 })
	adminUUID := lsNamed(t, c, def.Switch).QOSRules[0]

	pod := topology.PodIn{Namespace: "ns", Name: "q", Switch: def.Switch, IPs: []netip.Addr{a("10.16.0.9")}, MAC: "0a:58:0a:10:00:09",
		Bandwidth: topology.Bandwidth{IngressKbps: 20000, EgressKbps: 100000}}
	port := contract.PodPortName("ns", "q")
	got := settled(t, c, topology.ForPod(pod))
	if countOps(got, "insert QoS") != 2 {
		t.Errorf("limited pod: %v, want 2 QoS inserts", got)
	}
	rows := checkQoS(t, c, map[string]nb.QoS{
		"egress":  {Direction: "from-lport", Match: `inport == "` + port + `"`, Bandwidth: map[string]int{"rate": 100000, "burst": 80000}},
		"ingress": {Direction: "to-lport", Match: `outport == "` + port + `"`, Bandwidth: map[string]int{"rate": 20000, "burst": 16000}},
	}, adminUUID)

	pod.Bandwidth.EgressKbps = 20000
	if got := settled(t, c, topology.ForPod(pod)); !slices.Equal(got, []string{"update QoS"}) {
		t.Errorf("egress 100M -> 20M: %v, want one QoS update", got)
	}
	after := checkQoS(t, c, map[string]nb.QoS{
		"egress":  {Direction: "from-lport", Match: `inport == "` + port + `"`, Bandwidth: map[string]int{"rate": 20000, "burst": 16000}},
		"ingress": {Direction: "to-lport", Match: `outport == "` + port + `"`, Bandwidth: map[string]int{"rate": 20000, "burst": 16000}},
	}, adminUUID)
	if after["egress"].UUID != rows["egress"].UUID {
		t.Error("the egress row was replaced, not updated in place")
	}
	if b, err := ProgrammedBandwidth(context.Background(), c, "ns", "q"); err != nil || b != pod.Bandwidth {
		t.Errorf("programmed bandwidth %+v, %v; want %+v", b, err, pod.Bandwidth)
	}

	pod.Bandwidth.IngressKbps = 0
	if got := settled(t, c, topology.ForPod(pod)); !slices.Equal(got, []string{"delete QoS", "mutate Logical_Switch"}) {
		t.Errorf("ingress limit lifted: %v, want the row deleted and unlisted", got)
	}
	checkQoS(t, c, map[string]nb.QoS{
		"egress": {Direction: "from-lport", Match: `inport == "` + port + `"`, Bandwidth: map[string]int{"rate": 20000, "burst": 16000}},
	}, adminUUID)
	if n := apply(t, c, topology.ForPod(pod)); n != 0 {
		t.Errorf("re-apply sent %d operations", n)
	}

	settled(t, c, emptyPod("ns", "q"))
	checkQoS(t, c, map[string]nb.QoS{}, adminUUID)
}

func emptyPod(ns, name string) topology.Shard {
	return topology.Shard{OwnerType: topology.OwnerPod, Owner: ns + "/" + name}
}

// checkQoS checks that the pod ns/q owns exactly want's rows (by name) and that the default
// switch lists them and extra; it returns the rows by name.
func checkQoS(t *testing.T, c libovsdb.Client, want map[string]nb.QoS, extra ...string) map[string]nb.QoS {
	t.Helper()
	rows := map[string]nb.QoS{}
	for _, r := range list[nb.QoS](t, c) {
		if Owned(r.ExternalIDs, topology.OwnerPod, "ns/q") {
			rows[r.ExternalIDs[qosNameKey]] = r
		}
	}
	listed := slices.Clone(extra)
	for name, w := range want {
		r, ok := rows[name]
		if !ok || r.Direction != w.Direction || r.Match != w.Match || r.Priority != topology.PriorityPodQoS ||
			r.Bandwidth["rate"] != w.Bandwidth["rate"] || r.Bandwidth["burst"] != w.Bandwidth["burst"] ||
			r.ExternalIDs[ovn.ParentKey] != def.Switch {
			t.Errorf("QoS %s: row %+v, want %+v", name, r, w)
		}
		listed = append(listed, r.UUID)
	}
	if len(rows) != len(want) {
		t.Errorf("pod owns %d QoS rows, want %d", len(rows), len(want))
	}
	if ls := lsNamed(t, c, def.Switch); !sameSet(ls.QOSRules, listed) {
		t.Errorf("switch lists QoS %v, want %v", ls.QOSRules, listed)
	}
	return rows
}
