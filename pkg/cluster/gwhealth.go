package cluster

import (
	"context"
	"strings"
	"sync"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/sb"
)

// GatewayHealth is OVN's own verdict on which gateway node of a centralized subnet is alive:
// the chassis its health port (topology.HealthPortName) is bound to. OVN binds that port, a
// distributed gateway port carrying the subnet's gateway nodes as gateway chassis by priority,
// to the highest-priority chassis the others see through BFD, as it does the interconnect's
// transit ports; kovn-daemon's gateway guard turns a gateway's BFD off when its ovn-controller
// dies. So a lost node, a cut link and a dead ovn-controller move the subnet's egress within
// BFD's detection time, where Node readiness takes the node monitor's grace period.
//
// It reads SB through a monitor of the chassisredirect Port_Bindings, the Chassis and the
// Chassis_Private rows (how far each ovn-controller has caught up, for the interconnect's
// gateway hold). Until it is connected (or with no SB address) Bound and CaughtUp know nothing
// and the subnet reconciler falls back to Node readiness.
type GatewayHealth struct {
	Endpoints []string
	// Credentials, if set, is the client certificate for ssl endpoints.
	Credentials ovn.CredentialSource
	// NB, when set, is where every replica moves a centralized subnet's egress itself
	// (nbsync.FollowGateway) as soon as a health port's binding changes, leader or not.
	NB libovsdb.Client
	// moveEgress moves a subnet's egress to node; nbsync.FollowGateway on NB unless a test
	// sets it.
	moveEgress func(ctx context.Context, subnet, node string) (int, error)

	mu     sync.Mutex
	sb     libovsdb.Client
	live   *ovn.Liveness
	events chan event.TypedGenericEvent[reconcile.Request]
	// portEvents carries the other gateway ports whose binding changed, by port name.
	portEvents chan event.TypedGenericEvent[reconcile.Request]
	// reported is each health port's chassis as last queued, so that a binding seen both in
	// the initial listing and through the cache's event is queued once.
	reported map[string]string
	// moved holds the latest chassis of each subnet whose health port changed, for the
	// follower; wake tells it there is something.
	moved map[string]string
	wake  chan struct{}
}

// NewGatewayHealth returns a GatewayHealth for the SB endpoints (none: disabled).
func NewGatewayHealth(endpoints []string) *GatewayHealth {
	return &GatewayHealth{Endpoints: endpoints, events: make(chan event.TypedGenericEvent[reconcile.Request], 64),
		portEvents: make(chan event.TypedGenericEvent[reconcile.Request], 64), moved: map[string]string{}, wake: make(chan struct{}, 1)}
}

// NeedLeaderElection: every replica keeps the cache warm, so a new leader has the verdicts.
func (h *GatewayHealth) NeedLeaderElection() bool { return false }

// Start connects (retrying until ctx ends) and forwards binding changes as subnet events.
func (h *GatewayHealth) Start(ctx context.Context) error {
	if len(h.Endpoints) == 0 {
		ctrl.Log.Info("no OVN southbound address: centralized subnet gateways fail over on Node readiness only")
		<-ctx.Done()
		return nil
	}
	dbModel, err := sb.FullDatabaseModel()
	if err != nil {
		return err
	}
	if h.moveEgress == nil && h.NB != nil {
		h.moveEgress = func(ctx context.Context, subnet, node string) (int, error) {
			return nbsync.FollowGateway(ctx, h.NB, subnet, node)
		}
	}
	if h.moveEgress != nil {
		go h.follow(ctx)
	}
	pb, cp := &sb.PortBinding{}, &sb.ChassisPrivate{}
	c, err := ovn.ConnectMonitor(ctx, dbModel, ovn.Config{Endpoints: h.Endpoints, Logger: ctrl.Log.WithName("sb"), Credentials: h.Credentials},
		libovsdb.WithConditionalTable(pb, []model.Condition{{Field: &pb.Type, Function: ovsdb.ConditionEqual, Value: "chassisredirect"}},
			&pb.LogicalPort, &pb.Chassis, &pb.Type),
		libovsdb.WithTable(&sb.Chassis{}),
		libovsdb.WithTable(cp, &cp.Name, &cp.NbCfg))
	if err != nil {
		return err
	}
	defer c.Close()
	// The follower resolves chassis names through this client: it must be in place before the
	// first binding is queued, or a binding that moved before this replica connected (a
	// standby starting while the leader's gateway is down) is dropped unresolved.
	h.mu.Lock()
	h.sb = c
	h.mu.Unlock()
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { h.notify(m, false) },
		UpdateFunc: func(_ string, _, m model.Model) { h.notify(m, false) },
		DeleteFunc: func(_ string, m model.Model) { h.notify(m, true) },
	})
	// The monitor's initial rows reached the cache before the handler was in place: queue them
	// too, or a binding present at start would be known (Bound) but never reported.
	var bindings []*sb.PortBinding
	if err := c.List(ctx, &bindings); err != nil {
		return err
	}
	for _, b := range bindings {
		h.notify(b, false)
	}
	live := ovn.WatchLiveness(ctx, c, 0)
	h.mu.Lock()
	h.live = live
	h.mu.Unlock()
	ctrl.Log.Info("centralized subnet gateways follow OVN's gateway health (SB connected)")
	<-ctx.Done()
	return nil
}

// notify queues a reconcile of the subnet whose health port changed, or an event on
// portEvents for another gateway port (an external network's, whose node EgressIPs report).
// It must not block the libovsdb cache, hence the goroutine when a channel is full.
func (h *GatewayHealth) notify(m model.Model, deleted bool) {
	pb, ok := m.(*sb.PortBinding)
	if !ok {
		return
	}
	port := strings.TrimPrefix(pb.LogicalPort, "cr-")
	subnet, isHealth := topology.SubnetOfHealthPort(port)
	chassis := "-" // bound to none
	if pb.Chassis != nil {
		chassis = *pb.Chassis
	}
	h.mu.Lock()
	if h.reported == nil {
		h.reported = map[string]string{}
	}
	last, seen := h.reported[pb.LogicalPort]
	if deleted {
		delete(h.reported, pb.LogicalPort)
	} else {
		h.reported[pb.LogicalPort] = chassis
	}
	if isHealth && !deleted && pb.Chassis != nil {
		h.moved[subnet] = *pb.Chassis
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
	if !deleted && seen && last == chassis {
		return
	}
	ch, name := h.events, subnet
	if !isHealth {
		ch, name = h.portEvents, port
	}
	ev := event.TypedGenericEvent[reconcile.Request]{Object: reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}}
	select {
	case ch <- ev:
	default:
		go func() { ch <- ev }()
	}
}

// follow moves each centralized subnet's egress to the node its health port was last bound
// to, in this replica, until ctx ends. Only the latest binding of each subnet is applied: a
// burst of changes costs one transaction per subnet. A failed write is retried on the next
// change; the leader's reconcile of the subnet writes the same verdict in any case.
func (h *GatewayHealth) follow(ctx context.Context) {
	log := ctrl.Log.WithName("gateway-failover")
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.mu.Lock()
		moved := h.moved
		h.moved = map[string]string{}
		c := h.sb
		h.mu.Unlock()
		for subnet, chassisUUID := range moved {
			node := chassisName(ctx, c, chassisUUID)
			if node == "" {
				continue
			}
			ops, err := h.moveEgress(ctx, subnet, node)
			switch {
			case err != nil:
				log.Error(err, "moving a centralized subnet's egress", "subnet", subnet, "node", node)
			case ops > 0:
				log.Info("centralized subnet's egress moved to the node OVN bound its health port to", "subnet", subnet, "node", node)
			}
		}
	}
}

// chassisName is the name (kovn's node name) of the SB Chassis row with uuid, "" if unknown.
func chassisName(ctx context.Context, c libovsdb.Client, uuid string) string {
	if c == nil {
		return ""
	}
	ch := &sb.Chassis{UUID: uuid}
	if err := c.Get(ctx, ch); err != nil {
		return ""
	}
	return ch.Name
}

// Bound returns the chassis (node) name OVN bound the health port to, "" when none or unknown.
func (h *GatewayHealth) Bound(port string) string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	c := h.sb
	h.mu.Unlock()
	if c == nil {
		return ""
	}
	var pbs []*sb.PortBinding
	err := c.WhereCache(func(pb *sb.PortBinding) bool { return pb.LogicalPort == "cr-"+port }).List(context.Background(), &pbs)
	if err != nil || len(pbs) != 1 || pbs[0].Chassis == nil {
		return ""
	}
	return chassisName(context.Background(), c, *pbs[0].Chassis)
}

// CaughtUp reports whether the chassis' ovn-controller has installed the flows of northbound
// configuration nbCfg (NB_Global.nb_cfg) or a later one: it is connected to SB and in step.
// known is false while SB is not connected or the chassis has no Chassis_Private row.
func (h *GatewayHealth) CaughtUp(chassis string, nbCfg int64) (caughtUp, known bool) {
	if h == nil {
		return false, false
	}
	h.mu.Lock()
	c := h.sb
	h.mu.Unlock()
	if c == nil {
		return false, false
	}
	var rows []*sb.ChassisPrivate
	err := c.WhereCache(func(cp *sb.ChassisPrivate) bool { return cp.Name == chassis }).List(context.Background(), &rows)
	if err != nil || len(rows) != 1 {
		return false, false
	}
	return int64(rows[0].NbCfg) >= nbCfg, true
}

// Connected reports whether the southbound database answers (ovn.Liveness: libovsdb's own
// Connected stays true while it reconnects, when the monitor's rows are stale).
func (h *GatewayHealth) Connected() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live.Answers()
}
