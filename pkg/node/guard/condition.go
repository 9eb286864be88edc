package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// The Node conditions kovn-daemon keeps (kovnv1.NodeConditionNetworkReady,
// kovnv1.NodeConditionTunnelsUp) and their reasons.
const (
	ConditionNetworkReady   = corev1.NodeConditionType(kovnv1.NodeConditionNetworkReady)
	ConditionTunnelsUp      = corev1.NodeConditionType(kovnv1.NodeConditionTunnelsUp)
	ConditionHeartbeat      = kovnv1.NodeConditionHeartbeat
	ReasonNodeNetworkReady  = kovnv1.ReasonNodeNetworkReady
	ReasonOVSDown           = kovnv1.ReasonOVSDown
	ReasonOVNControllerDown = kovnv1.ReasonOVNControllerDown
	ReasonNotPlumbed        = kovnv1.ReasonNotPlumbed
)

// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch

// nodeReading is what the condition is made from.
type nodeReading struct {
	ovsUp, ovnControllerUp, plumbed bool
	ovnControllerPidfile            string
	tunnelsRead                     bool   // the tunnels' BFD sessions were read
	bfdNotUp                        string // remote addresses of the sessions not up, comma-separated
	bfdSessions                     int
}

// networkCondition is the condition for a reading; the transition time is prev's while the
// status stays the same.
func networkCondition(r nodeReading, now metav1.Time, prev *corev1.NodeCondition) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: ConditionNetworkReady, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now}
	switch {
	case !r.ovsUp:
		c.Reason = ReasonOVSDown
		c.Message = "OVS is down: ovsdb-server does not answer or ovs-vswitchd's control socket is gone; pods here have no network"
	case !r.ovnControllerUp:
		c.Reason = ReasonOVNControllerDown
		c.Message = fmt.Sprintf("ovn-controller is not running (no live process in %s): new pods' ports stay down and "+
			"flows are not updated here", r.ovnControllerPidfile)
	case !r.plumbed:
		c.Reason = ReasonNotPlumbed
		c.Message = "kovn-daemon has not finished this node's plumbing yet (no CNI config written)"
	default:
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, ReasonNodeNetworkReady, "OVS, ovn-controller and the node's plumbing are up"
	}
	keepTransition(&c, prev)
	return c
}

// tunnelsCondition is NodeConditionTunnelsUp for a reading.
func tunnelsCondition(r nodeReading, now metav1.Time, prev *corev1.NodeCondition) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: ConditionTunnelsUp, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now,
		Reason: kovnv1.ReasonBFDUp, Message: fmt.Sprintf("all %d BFD sessions on this node's tunnels are up", r.bfdSessions)}
	switch {
	case !r.tunnelsRead:
		c.Status, c.Reason = corev1.ConditionUnknown, kovnv1.ReasonTunnelsUnread
		c.Message = "the tunnels' BFD sessions cannot be read: the node's OVS database does not answer"
	case r.bfdNotUp != "":
		c.Status, c.Reason = corev1.ConditionFalse, kovnv1.ReasonBFDDown
		c.Message = "BFD sessions not up toward " + r.bfdNotUp
	}
	keepTransition(&c, prev)
	return c
}

// keepTransition keeps prev's transition time while the status stays the same.
func keepTransition(c *corev1.NodeCondition, prev *corev1.NodeCondition) {
	if prev != nil && prev.Status == c.Status && !prev.LastTransitionTime.IsZero() {
		c.LastTransitionTime = prev.LastTransitionTime
	}
}

// NodeConditionReporter keeps ConditionNetworkReady and ConditionTunnelsUp on this node's
// status: at once when the reading changes (checked every second), else every
// ConditionHeartbeat.
type NodeConditionReporter struct {
	Client   client.Client // the daemon's: its cache holds this node
	NodeName string
	Health   *NodeHealth
	Plumbed  func() bool
}

// NeedLeaderElection: every node's daemon reports its own node.
func (*NodeConditionReporter) NeedLeaderElection() bool { return false }

// Start reports until ctx ends; a failed write is retried at the next check.
func (n *NodeConditionReporter) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("node-condition")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last nodeReading
	var written time.Time
	for {
		r := nodeReading{ovsUp: n.Health.ovsUp() == 1, ovnControllerUp: n.Health.ovnControllerUp() == 1,
			plumbed: n.Plumbed(), ovnControllerPidfile: n.Health.OVNControllerPidfile}
		r.tunnelsRead, r.bfdSessions, r.bfdNotUp = n.Health.bfdSessions(ctx)
		if r != last || time.Since(written) >= ConditionHeartbeat {
			if err := n.write(ctx, r); err != nil {
				log.Error(err, "writing the node's network condition")
			} else {
				last, written = r, time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (n *NodeConditionReporter) write(ctx context.Context, r nodeReading) error {
	var node corev1.Node
	if err := n.Client.Get(ctx, k8stypes.NamespacedName{Name: n.NodeName}, &node); err != nil {
		return err
	}
	prev := func(typ corev1.NodeConditionType) *corev1.NodeCondition {
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == typ {
				return &node.Status.Conditions[i]
			}
		}
		return nil
	}
	now := metav1.Now()
	conds := []corev1.NodeCondition{networkCondition(r, now, prev(ConditionNetworkReady)), tunnelsCondition(r, now, prev(ConditionTunnelsUp))}
	// A strategic merge patch merges conditions by type: the kubelet's own stay untouched.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	return n.Client.Status().Patch(ctx, &node, client.RawPatch(k8stypes.StrategicMergePatchType, patch))
}
