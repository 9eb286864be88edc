package interconnect

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ovn"
)

// Event reasons of the gateway hold.
const (
	ReasonGatewayHeld     = "GatewayHeld"
	ReasonGatewayReleased = "GatewayReleased"
)

// holdMin is the shortest hold: a gateway's BFD sessions go down with it, and kovn-daemon
// reports that on the Node within about 1 s; a hold shorter than that could be released on
// the conditions of before the failure.
const holdMin = 3 * time.Second

// holdPoll is how often a reconcile looks for held gateways that caught up (the failback is
// not urgent: the standby carries the traffic meanwhile).
const holdPoll = time.Second

// holds tracks what the gateway hold needs between reconciles: the chassis each transit port
// was last seen bound to, and the held gateways. The holds are written to the status too, so
// a new leader takes them over.
type holds struct {
	bound  map[string]string // transit switch port -> chassis, as IC-SB last reported it
	held   map[string]kovnv1.GatewayHold
	loaded bool
}

// updateHolds holds the gateways OVN just found dead (their transit port moved down the order)
// and releases those whose ovn-controller caught up once every gateway's BFD sessions are up
// (tunnelsUp), and sets in.Held. Without the southbound
// monitor (no --ovn-sb-addr) no gateway is held: OVN fails back as soon as BFD sees the node.
// pending says some gateway is still held, so the reconciler looks again.
func (r *Reconciler) updateHolds(ctx context.Context, ic *kovnv1.InterConnect, in *Input, cs clusterset, nodes []corev1.Node) (pending bool, err error) {
	h := &r.holds
	if !h.loaded {
		h.held = map[string]kovnv1.GatewayHold{}
		for _, g := range ic.Status.Gateways {
			if g.Held != nil {
				h.held[g.Node] = *g.Held
			}
		}
		h.loaded = true
	}
	maps.DeleteFunc(h.held, func(node string, _ kovnv1.GatewayHold) bool { return !slices.Contains(in.Gateways, node) })
	in.Held = slices.Sorted(maps.Keys(h.held))
	var ports []string
	var orders [][]string
	for _, ts := range in.TransitSwitches {
		i, _ := transitSwitchIndex(ts)
		ports = append(ports, SwitchPortName(in.AZ, ts))
		orders = append(orders, portOrder(*in, i))
	}
	now := map[string]string{}
	for _, p := range ports {
		if g := cs.portGateway[p]; g != "" {
			now[p] = g
		}
	}
	lost := slices.DeleteFunc(lostGateways(orders, ports, h.bound, now, in.Held), func(g string) bool { _, ok := h.held[g]; return ok })
	if !r.Health.Connected() {
		h.bound = now
		return len(h.held) > 0, nil
	}
	if len(lost) > 0 {
		// One northbound change after the failure: a held node is released once its
		// ovn-controller has installed it, which proves it is connected to SB and in step.
		// On an error the bindings stay as they were, so the next attempt sees the loss again.
		cfg, err := ovn.BumpNbCfg(ctx, r.NB)
		if err != nil {
			return false, fmt.Errorf("holding gateways %v: %w", lost, err)
		}
		for _, g := range lost {
			h.held[g] = kovnv1.GatewayHold{Since: metav1.Now(), NbCfg: cfg}
			r.event(ic, corev1.EventTypeWarning, ReasonGatewayHeld, fmt.Sprintf(
				"gateway %s lost its transit port to a standby: held at the lowest priority until its ovn-controller is in step again (nb_cfg %d)", g, cfg))
		}
	}
	h.bound = now
	up := tunnelsUp(nodes, in.Gateways)
	for g, hold := range h.held {
		if time.Since(hold.Since.Time) < holdMin || !up {
			continue
		}
		if ok, _ := r.Health.CaughtUp(g, hold.NbCfg); ok {
			delete(h.held, g)
			r.event(ic, corev1.EventTypeNormal, ReasonGatewayReleased, fmt.Sprintf(
				"gateway %s is in step again (nb_cfg %d) and the gateways' BFD sessions are up after %s: back to its priority",
				g, hold.NbCfg, time.Since(hold.Since.Time).Round(100*time.Millisecond)))
		}
	}
	in.Held = slices.Sorted(maps.Keys(h.held))
	return len(h.held) > 0, nil
}

// tunnelsUp says whether none of the gateways reports a BFD session not up
// (kovnv1.NodeConditionTunnelsUp). OVN decides which gateway holds a port on each chassis from
// that chassis' own sessions: a gateway given its port back while a standby still sees it down
// (a link just restored, its sessions coming up one end at a time) is fought over by both, and
// the port changes hands for seconds. A gateway whose daemon reports no such condition does not
// block the release (without it, the hold ends as soon as ovn-controller is in step).
func tunnelsUp(nodes []corev1.Node, gateways []string) bool {
	for i := range nodes {
		if !slices.Contains(gateways, nodes[i].Name) {
			continue
		}
		for _, c := range nodes[i].Status.Conditions {
			if c.Type == kovnv1.NodeConditionTunnelsUp && c.Status != corev1.ConditionTrue {
				return false
			}
		}
	}
	return true
}

func (r *Reconciler) event(ic *kovnv1.InterConnect, kind, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Event(ic, kind, reason, msg)
	}
}
