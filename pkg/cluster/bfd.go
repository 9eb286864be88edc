package cluster

import (
	"context"
	"strconv"

	libovsdb "github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// The BFD timers kovn gives every gateway failover (centralized subnet gateways, interconnect
// gateways without their own bfd settings): 100 ms x 5, a lost gateway detected in 0.5 s (OVN's
// own 1 s x 3 took 2.8 s in the lab). The detection time must outlast how late a starved node
// sends: OVS sends BFD from its monitor thread, which on the loaded 2-core lab (two clusters of
// three nodes) ran up to 457 ms late (228 late sends in 5 min: 25 of them 200 ms or more), so
// the former 60 ms x 3 (0.18 s) flapped 22-27 times per node in those 5 min, each flap a
// failover and a fight over the port. Faster timers suit nodes with CPU to spare: spec.bfd.
const (
	GatewayBFDIntervalMillis = 100
	GatewayBFDMult           = 5
)

// GatewayBFDOptions are those timers as NB_Global options. An InterConnect's spec.bfd overrides
// them while it exists and puts these back when it goes.
var GatewayBFDOptions = map[string]string{
	"bfd-min-rx": strconv.Itoa(GatewayBFDIntervalMillis),
	"bfd-min-tx": strconv.Itoa(GatewayBFDIntervalMillis),
	"bfd-mult":   strconv.Itoa(GatewayBFDMult),
}

// EnsureGatewayBFD writes the GatewayBFDOptions missing from NB_Global; values present (an
// InterConnect's, or an operator's) stay.
func EnsureGatewayBFD(ctx context.Context, c libovsdb.Client) error {
	_, err := ovn.UpdateGlobal(ctx, c, func(m *nb.NBGlobal) ovn.GlobalChange {
		missing := map[string]string{}
		for k, v := range GatewayBFDOptions {
			if _, ok := m.Options[k]; !ok {
				missing[k] = v
			}
		}
		return ovn.GlobalChange{Mutations: ovn.MapMutations(&m.Options, m.Options, missing, nil)}
	})
	return err
}
