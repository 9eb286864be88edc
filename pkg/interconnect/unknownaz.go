package interconnect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// unknownSettle is how long an AZ stays on kovn's transit switches without a join record
// before it is reported: a renamed AZ's old name is there without one until its cluster has
// removed it, a moment after the rename.
const unknownSettle = 10 * time.Second

// unknownAZs are the AZs with ports or routes on kovn's transit switches in IC-SB but no join
// record in IC-NB, sorted, this AZ's names (self) aside. Every kovn cluster records its join
// before its ovn-ic joins the switches (a ForeignAZ stays on its own switch), so such an AZ
// was made up with a certificate of the clusterset, or is an OVN deployment joined without
// kovn. Its routes are refused unless it declared subnets (declaredRoutes).
func unknownAZs(cs clusterset, joined map[string]time.Time, self ...string) []string {
	var out []string
	for az := range cs.members {
		if _, ok := joined[az]; !ok && !slices.Contains(self, az) {
			out = append(out, az)
		}
	}
	sort.Strings(out)
	return out
}

// unknownWatch remembers since when each unknown AZ has been seen.
type unknownWatch struct {
	mu    sync.Mutex
	since map[string]time.Time
	shown string // the last report's message, for one event per change
}

// observe records this pass's unknown AZs and returns those unknown for unknownSettle or
// more, and whether others wait to be (a pass should run again within unknownSettle).
func (w *unknownWatch) observe(unknown []string, now time.Time) (report []string, waiting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	since := map[string]time.Time{}
	for _, az := range unknown {
		at, ok := w.since[az]
		if !ok {
			at = now
		}
		since[az] = at
		if now.Sub(at) >= unknownSettle {
			report = append(report, az)
		} else {
			waiting = true
		}
	}
	w.since = since
	return report, waiting
}

// noteUnknown reports the AZs unknownAZs found for unknownSettle: Degraded (reason UnknownAZ,
// before any repair the condition already names), a Warning event when the list changes,
// kovn_ic_local{item="unknown_azs"}. It returns whether a pass should run within
// unknownSettle.
func (r *Reconciler) noteUnknown(run *joinRun) bool {
	ic := run.ic
	report, waiting := r.unknown.observe(unknownAZs(run.cs, run.joined, ic.Spec.AZName, run.renamedFrom), time.Now())
	r.lastView.unknown = len(report)
	if len(report) == 0 {
		r.unknown.mu.Lock()
		r.unknown.shown = ""
		r.unknown.mu.Unlock()
		return waiting
	}
	msg := fmt.Sprintf("AZ %s on kovn's transit switches without a join record in IC-NB (made up with a clusterset certificate, "+
		"or an OVN deployment joined without kovn: a ForeignAZ keeps to its own transit switch); its routes are refused "+
		"unless it declared subnets", strings.Join(report, ", "))
	if c := meta.FindStatusCondition(ic.Status.Conditions, kovnv1.ConditionDegraded); c != nil && c.Status == "True" && c.Reason != kovnv1.ReasonUnknownAZ {
		msg += "; and " + c.Message
	}
	setCondition(ic, kovnv1.ConditionDegraded, true, kovnv1.ReasonUnknownAZ, msg)
	r.unknown.mu.Lock()
	changed := r.unknown.shown != strings.Join(report, ",")
	r.unknown.shown = strings.Join(report, ",")
	r.unknown.mu.Unlock()
	if changed && r.Recorder != nil {
		r.Recorder.Event(ic, corev1.EventTypeWarning, kovnv1.ReasonUnknownAZ, msg)
	}
	return waiting
}
