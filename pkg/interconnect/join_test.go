package interconnect

import (
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// TestRequeue: a waiting ForeignAZ brings the next look to 1 s, a held gateway to holdPoll
// unless the reconcile failed (the error requeues it anyway); a sooner requeue stays.
func TestRequeue(t *testing.T) {
	failed := errors.New("failed")
	for _, tc := range []struct {
		desc             string
		after            time.Duration
		err              error
		waiting, holding bool
		want             time.Duration
	}{
		{"nothing pending keeps readiness's minute", time.Minute, nil, false, false, time.Minute},
		{"a waiting ForeignAZ", time.Minute, nil, true, false, time.Second},
		{"a waiting ForeignAZ, readiness asked for nothing", 0, nil, true, false, time.Second},
		{"a waiting ForeignAZ does not delay a sooner look", 200 * time.Millisecond, nil, true, false, 200 * time.Millisecond},
		{"a held gateway", time.Minute, nil, false, true, holdPoll},
		{"a held gateway, readiness asked for nothing", 0, nil, false, true, holdPoll},
		{"a held gateway after an error", 0, failed, false, true, 0},
		{"a waiting ForeignAZ after an error", 0, failed, true, false, time.Second},
		{"both", time.Minute, nil, true, true, time.Second},
	} {
		if got := requeue(ctrl.Result{RequeueAfter: tc.after}, tc.err, tc.waiting, tc.holding); got.RequeueAfter != tc.want {
			t.Errorf("%s: RequeueAfter %v, want %v", tc.desc, got.RequeueAfter, tc.want)
		}
	}
}

// TestGoodForeign: only the peerings with a spec to program, in order.
func TestGoodForeign(t *testing.T) {
	got := goodForeign([]foreignPeering{
		{in: ForeignIn{Name: "a"}, good: true},
		{in: ForeignIn{Name: "b"}, invalid: errors.New("bad")},
		{in: ForeignIn{Name: "c"}, invalid: errors.New("bad"), good: true}, // its last valid spec
	})
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Errorf("goodForeign = %+v, want a and c", got)
	}
}
