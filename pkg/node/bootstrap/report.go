package bootstrap

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Event reasons on the Node for step health.
const (
	ReasonStepFailed    = "KovnStepFailed"
	ReasonStepRecovered = "KovnStepRecovered"
)

// report turns a change in a step's health into a log line and an event on the Node. Events,
// not a Node condition: a condition needs nodes/status write access, which RBAC cannot limit to
// the daemon's own Node, so any daemon could rewrite every node's status (Ready included);
// events need only create, and `kubectl describe node` shows them. The runner reports a step
// once per distinct error and once on recovery, so a failing step does not flood the API.
func (r *Reconciler) report(ctx context.Context, node *corev1.Node, rep StepReport) {
	l := log.FromContext(ctx).WithValues("node", node.Name, "step", rep.Step)
	if rep.Recovered {
		l.Info("node step recovered")
		if r.Recorder != nil {
			r.Recorder.Eventf(node, corev1.EventTypeNormal, ReasonStepRecovered, "kovn step %s succeeded again", rep.Step)
		}
		return
	}
	withheld := "nothing else waits for it"
	if len(rep.Blocks) > 0 {
		withheld = "withheld until it succeeds: " + strings.Join(rep.Blocks, ", ")
	}
	l.Error(rep.Err, "node step failed", "retryIn", rep.RetryIn, "withheld", rep.Blocks)
	if r.Recorder != nil {
		r.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonStepFailed, "kovn step %s failed (retry in %s; %s): %v",
			rep.Step, rep.RetryIn, withheld, rep.Err)
	}
}
