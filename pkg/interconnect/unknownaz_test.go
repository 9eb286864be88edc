package interconnect

import (
	"slices"
	"testing"
	"time"
)

// TestUnknownAZs: an AZ on kovn's transit switches without a join record is unknown once it
// stayed so for unknownSettle; this AZ's names, joined AZs and AZs that left are not.
func TestUnknownAZs(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cs := clusterset{members: map[string]bool{"az1": true, "az2": true, "az1-old": true, "rogue": true}}
	joined := map[string]time.Time{"az1": t0, "az2": t0}
	got := unknownAZs(cs, joined, "az1", "az1-old")
	if !slices.Equal(got, []string{"rogue"}) {
		t.Fatalf("unknown %v, want [rogue]", got)
	}
	var w unknownWatch
	if report, waiting := w.observe(got, t0); len(report) != 0 || !waiting {
		t.Errorf("first seen: report %v waiting %v, want none and waiting", report, waiting)
	}
	if report, waiting := w.observe(got, t0.Add(unknownSettle)); !slices.Equal(report, []string{"rogue"}) || waiting {
		t.Errorf("after unknownSettle: report %v waiting %v", report, waiting)
	}
	if report, waiting := w.observe(nil, t0.Add(2*unknownSettle)); len(report) != 0 || waiting {
		t.Errorf("gone: report %v waiting %v", report, waiting)
	}
	// Back again: the wait starts over.
	if report, _ := w.observe(got, t0.Add(3*unknownSettle)); len(report) != 0 {
		t.Errorf("back: reported at once: %v", report)
	}
}
