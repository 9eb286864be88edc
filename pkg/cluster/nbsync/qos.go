package nbsync

import (
	"context"
	"maps"

	"github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// QoS rows (a pod's bandwidth meters) hang off their switch's qos_rules, which other shards
// and writers share: like a switch's ACLs they join and leave it by mutation. QoS is not a
// root table, so a row the switch no longer lists is deleted by the server; nbsync deletes it
// explicitly in the same transaction all the same. Rows are keyed on their switch and name
// (qosNameKey), so a changed rate updates the row in place and the switch is not touched.

// qosNameKey holds a QoS row's name within its shard (the table has no name column).
const qosNameKey = "kovn.io/qos"

func (t *tx) syncQoS() {
	want := map[string]topology.QoS{}
	for _, q := range t.sh.QoS {
		want[q.Switch+"|"+q.Name] = q
	}
	done := map[string]bool{}
	for _, cur := range findOwned(t, &nb.QoS{ExternalIDs: ownerProbe(t.sh)}) {
		k := cur.ExternalIDs[ovn.ParentKey] + "|" + cur.ExternalIDs[qosNameKey]
		q, ok := want[k]
		if !ok || done[k] {
			if ls, isNew := t.lswitch(cur.ExternalIDs[ovn.ParentKey]); !isNew {
				detach(t, ls, switchQoS, cur.UUID)
			}
			t.delete(cur)
			continue
		}
		done[k] = true
		m := t.qosModel(q)
		m.UUID = cur.UUID
		if !sameQoS(cur, m) {
			t.update(m, &m.Direction, &m.Priority, &m.Match, &m.Bandwidth, &m.Action, &m.ExternalIDs)
		}
	}
	for _, q := range t.sh.QoS {
		if done[q.Switch+"|"+q.Name] {
			continue
		}
		ls, isNew := t.lswitch(q.Switch)
		if ls == nil {
			t.missing = append(t.missing, "switch "+q.Switch)
			continue
		}
		m := t.qosModel(q)
		attach(t, "switch "+q.Switch, ls, isNew, switchQoS, t.create(m, func(id string) { m.UUID = id }))
	}
}

func (t *tx) qosModel(q topology.QoS) *nb.QoS {
	return &nb.QoS{Direction: q.Direction, Priority: q.Priority, Match: q.Match, Action: map[string]int{},
		Bandwidth:   map[string]int{nb.QoSBandwidthRate: q.RateKbps, nb.QoSBandwidthBurst: q.BurstKbits},
		ExternalIDs: t.ids(map[string]string{qosNameKey: q.Name}, q.Switch)}
}

func sameQoS(cur, want *nb.QoS) bool {
	return cur.Direction == want.Direction && cur.Priority == want.Priority && cur.Match == want.Match &&
		maps.Equal(cur.Bandwidth, want.Bandwidth) && len(cur.Action) == 0 && sameMap(cur.ExternalIDs, want.ExternalIDs)
}

// ProgrammedBandwidth is what the pod's QoS rows in c's cache limit it to now (0: no limit),
// the state a refused annotation leaves in force.
func ProgrammedBandwidth(ctx context.Context, c client.Client, namespace, name string) (topology.Bandwidth, error) {
	sh := topology.Shard{OwnerType: topology.OwnerPod, Owner: namespace + "/" + name}
	rows, err := ownedRows(ctx, c, &nb.QoS{ExternalIDs: ownerProbe(sh)}, sh.OwnerType, sh.Owner)
	if err != nil {
		return topology.Bandwidth{}, err
	}
	var out topology.Bandwidth
	for _, r := range rows {
		switch r.ExternalIDs[qosNameKey] {
		case "ingress":
			out.IngressKbps = r.Bandwidth[nb.QoSBandwidthRate]
		case "egress":
			out.EgressKbps = r.Bandwidth[nb.QoSBandwidthRate]
		}
	}
	return out, nil
}
