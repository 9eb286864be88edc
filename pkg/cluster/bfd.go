package cluster

import (
	"context"
	"strconv"

	libovsdb "github.com/ovn-org/libovsdb/client"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// The BFD timers kovn gives every gateway failover (centralized subnet gateways, interconnect
// gateways without their own bfd settings): 60 ms x 3, a lost gateway detected in 0.18 s and
// replaced within 0.3 s (OVN's own 1 s x 3 took 2.8 s in the lab; 100 ms x 3 took 0.28-0.34 s).
// Faster timers flap on a busy node; on the 2-core lab, 12 sessions saw 0 flaps in 6 min of
// full-CPU compile load at 50 ms x 3, so 60 ms leaves a margin.
const (
	GatewayBFDIntervalMillis = 60
	GatewayBFDMult           = 3
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
