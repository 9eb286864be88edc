package guard

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
)

// GatewayGuard makes a gateway whose ovn-controller died look dead to its peers: an
// interconnect gateway, or a gateway node of a centralized subnet (whose health port OVN binds
// by the same BFD). Without ovn-controller the node's ovs-vswitchd keeps its flows and keeps
// answering BFD, so no peer fails over, while the gateway can no longer follow any change
// (RIG-NOTES). The guard checks ovn-controller every Interval; while it is down on a gateway
// (ovn-is-interconn, or named in a centralized Subnet's gatewayNodes), it turns BFD off on the
// node's tunnels: every peer
// then sees this chassis down within its BFD detection time and moves the gateway ports to the
// next chassis by priority. ovn-controller turns BFD back on when it returns (it sets the
// tunnels' bfd:enable to what it wants whenever the value differs), and the ports fail back.
type GatewayGuard struct {
	OVS      libovsdb.Client
	PidFile  string        // ovn-controller's pidfile
	Interval time.Duration // how often to check (default 100 ms)
	// Subnets (a cached reader) and NodeName tell whether this node is a centralized subnet's
	// gateway; nil Subnets: interconnect gateways only. A Subnet naming this node wrongly costs
	// nothing but BFD on a node whose ovn-controller is down anyway.
	Subnets  client.Reader
	NodeName string

	alive func(pidfile string) bool // nil: processAlive
}

// NeedLeaderElection: every node guards itself.
func (g *GatewayGuard) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (g *GatewayGuard) Start(ctx context.Context) error {
	if g.Interval == 0 {
		g.Interval = 100 * time.Millisecond
	}
	if g.alive == nil {
		g.alive = processAlive
	}
	log := ctrl.Log.WithName("gateway-guard")
	t := time.NewTicker(g.Interval)
	defer t.Stop()
	wasDown := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		down := !g.alive(g.PidFile) && (g.isGateway(ctx) || g.isCentralGateway(ctx))
		if down != wasDown {
			log.Info("ovn-controller on this interconnect gateway", "down", down)
			wasDown = down
		}
		if !down {
			continue
		}
		if n, err := g.disableTunnelBFD(ctx); err != nil {
			log.Error(err, "turning BFD off on the tunnels")
		} else if n > 0 {
			log.Info("ovn-controller is down: BFD turned off on the tunnels, the peers fail over", "tunnels", n)
		}
	}
}

func (g *GatewayGuard) isGateway(ctx context.Context) bool {
	var rows []vswitch.OpenvSwitch
	if err := g.OVS.List(ctx, &rows); err != nil || len(rows) != 1 {
		return false
	}
	return rows[0].ExternalIDs["ovn-is-interconn"] == "true"
}

// isCentralGateway reports whether a centralized Subnet names this node a gateway.
func (g *GatewayGuard) isCentralGateway(ctx context.Context) bool {
	if g.Subnets == nil {
		return false
	}
	var subnets kovnv1.SubnetList
	if err := g.Subnets.List(ctx, &subnets); err != nil {
		return false
	}
	return slices.ContainsFunc(subnets.Items, func(s kovnv1.Subnet) bool {
		return s.Spec.EffectiveGatewayType() == kovnv1.GatewayCentralized && slices.Contains(s.Spec.GatewayNodes, g.NodeName)
	})
}

// disableTunnelBFD sets bfd:enable=false on every OVN tunnel interface that has BFD on and
// returns how many it changed (the interconnect probes keep theirs: they say whether the other
// clusters can be reached, which a dead ovn-controller here does not change).
func (g *GatewayGuard) disableTunnelBFD(ctx context.Context) (int, error) {
	var ifaces []*vswitch.Interface
	err := g.OVS.WhereCache(func(i *vswitch.Interface) bool {
		return ovnTunnel(i) && i.BFD["enable"] == "true"
	}).List(ctx, &ifaces)
	if err != nil || len(ifaces) == 0 {
		return 0, err
	}
	var ops []ovsdb.Operation
	for _, i := range ifaces {
		m := vswitch.Interface{UUID: i.UUID}
		o, err := g.OVS.Where(&m).Mutate(&m, ovn.MapMutations(&m.BFD, i.BFD, map[string]string{"enable": "false"}, nil)...)
		if err != nil {
			return 0, err
		}
		ops = append(ops, o...)
	}
	if _, err := ovn.Transact(ctx, g.OVS, ops); err != nil {
		return 0, err
	}
	return len(ifaces), nil
}

// processAlive reports whether the process a pidfile names runs (a zombie does not).
func processAlive(pidfile string) bool {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
