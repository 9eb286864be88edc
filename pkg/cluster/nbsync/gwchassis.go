package nbsync

import (
	"slices"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// A gateway port's Gateway_Chassis rows are its own (the table is not a root one: a row no
// port references is deleted by the server). They are named "<port>_<chassis>", so a chassis
// whose priority changes keeps its row and only the priority is updated: re-creating the
// rows would restart every BFD session of the port and cost a second of traffic
// (RIG-NOTES), and a failover must cost no more than the failure itself.

func gatewayChassisName(port, chassis string) string { return port + "_" + chassis }

// gatewayChassis returns the UUIDs the port's gateway_chassis column must hold, given the rows
// it holds now (have), adding creates and priority updates to the transaction; changed
// reports whether the column itself must be rewritten.
func (t *tx) gatewayChassis(rp topology.RouterPort, have []string) (uuids []string, changed bool) {
	cur := map[string]*nb.GatewayChassis{}
	for _, id := range have {
		gc := &nb.GatewayChassis{UUID: id}
		if err := t.c.Get(t.ctx, gc); err == nil {
			cur[gc.Name] = gc
		}
	}
	for _, w := range rp.GatewayChassis {
		name := gatewayChassisName(rp.Name, w.Chassis)
		if gc, ok := cur[name]; ok && gc.ChassisName == w.Chassis {
			if gc.Priority != w.Priority {
				m := nb.GatewayChassis{UUID: gc.UUID, Priority: w.Priority}
				t.update(&m, &m.Priority)
			}
			uuids = append(uuids, gc.UUID)
			continue
		}
		m := nb.GatewayChassis{Name: name, ChassisName: w.Chassis, Priority: w.Priority, ExternalIDs: t.ids(nil, rp.Name)}
		uuids = append(uuids, t.create(&m, func(id string) { m.UUID = id }))
		changed = true
	}
	if len(uuids) != len(have) {
		changed = true
	}
	if !changed {
		slices.Sort(uuids)
		sorted := slices.Sorted(slices.Values(have))
		changed = !slices.Equal(uuids, sorted)
	}
	if uuids == nil {
		uuids = []string{}
	}
	return uuids, changed
}
