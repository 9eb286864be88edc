package interconnect

import (
	"testing"
	"time"
)

// TestDeclGuard: only a rewrite of the value this AZ itself wrote, found changed at least
// declSettle after that write, is someone else's change; a first pass, a declaration this AZ
// changes, and its own write not yet in the cache are not.
func TestDeclGuard(t *testing.T) {
	var g declGuard
	t0 := time.Unix(1000, 0)
	steps := []struct {
		desc         string
		found, want  string
		at           time.Duration
		wantTampered bool
	}{
		{"first pass writes", "", "10.16.0.0/16", 0, false},
		{"own write not in the cache yet", "", "10.16.0.0/16", time.Second, false},
		{"in place", "10.16.0.0/16", "10.16.0.0/16", 3 * time.Second, false},
		{"changed by someone else", "0.0.0.0/0", "10.16.0.0/16", 10 * time.Second, true},
		{"put back, then this AZ adds a subnet", "10.16.0.0/16", "10.16.0.0/16,10.17.0.0/16", 20 * time.Second, false},
		{"deleted by someone else", "", "10.16.0.0/16,10.17.0.0/16", 30 * time.Second, true},
	}
	for _, s := range steps {
		if got := g.observe("kovn.io/subnets/az1", s.found, s.want, t0.Add(s.at)); got != s.wantTampered {
			t.Errorf("%s: tampered = %t, want %t", s.desc, got, s.wantTampered)
		}
	}
	var restarted declGuard
	if restarted.observe("kovn.io/subnets/az1", "0.0.0.0/0", "10.16.0.0/16", t0) {
		t.Error("a fresh guard (kovn-controller restarted) reported a value it never wrote")
	}
}
