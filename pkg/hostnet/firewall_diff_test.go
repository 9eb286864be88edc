package hostnet

import (
	"slices"
	"strings"
	"testing"
)

// applyEdits plays edits on cur as iptables would, failing the test if the chain ever
// passes through empty while want is not.
func applyEdits(t *testing.T, cur, want []string, edits []chainEdit) []string {
	t.Helper()
	cur = slices.Clone(cur)
	for _, e := range edits {
		if e.insert {
			cur = slices.Insert(cur, e.pos-1, want[e.rule])
		} else {
			cur = slices.Delete(cur, e.pos-1, e.pos)
		}
		if len(cur) == 0 && len(want) > 0 {
			t.Errorf("the chain is empty after %+v", e)
		}
	}
	return cur
}

func TestChainEdits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cur, want  string // rules as letters
		maxEdits   int
		wantDelete bool
	}{
		{"unchanged", "abc", "abc", 0, false},
		{"from empty", "", "abc", 3, false},
		{"to empty", "abc", "", 3, true},
		{"one replaced", "abc", "axc", 2, true},
		{"one added in the middle", "ac", "abc", 1, false},
		{"one removed in the middle", "abc", "ac", 1, true},
		{"appended", "ab", "abc", 1, false},
		{"all replaced", "abc", "xyz", 6, true},
		{"swapped", "ab", "ba", 2, true},
		{"stale first", "sab", "ab", 3, true},
		{"duplicates", "aab", "aba", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, want := strings.Split(tc.cur, ""), strings.Split(tc.want, "")
			edits := chainEdits(cur, want)
			if got := applyEdits(t, cur, want, edits); !slices.Equal(got, want) {
				t.Errorf("%q after %+v = %q, want %q", tc.cur, edits, got, tc.want)
			}
			if len(edits) > tc.maxEdits {
				t.Errorf("%d edits %+v, want at most %d (unchanged rules stay)", len(edits), edits, tc.maxEdits)
			}
		})
	}
}

// TestChainEditsNeverDropTheCatchAll: upper-case rules catch everything (a NodePort's last,
// unconditional DNAT). While both the old and the new chain have one, every state between
// them must too: a packet never falls through the chain untranslated. A rollout's endpoint
// change ([p=0.5 -> A, -> B] to [p=0.33 -> A, p=0.5 -> B, -> C]) once deleted the old
// catch-all before the new one was in, and connections were refused.
func TestChainEditsNeverDropTheCatchAll(t *testing.T) {
	for _, tc := range []struct{ cur, want string }{
		{"aB", "cdE"}, {"aB", "acD"}, {"abC", "D"}, {"A", "bC"}, {"abC", "baD"}, {"xaB", "aC"},
	} {
		cur, want := strings.Split(tc.cur, ""), strings.Split(tc.want, "")
		state := slices.Clone(cur)
		for _, e := range chainEdits(cur, want) {
			if e.insert {
				state = slices.Insert(state, e.pos-1, want[e.rule])
			} else {
				state = slices.Delete(state, e.pos-1, e.pos)
			}
			if !slices.ContainsFunc(state, func(r string) bool { return strings.ToUpper(r) == r }) {
				t.Errorf("%s -> %s: no catch-all rule left after %+v: %v", tc.cur, tc.want, e, state)
			}
		}
		if !slices.Equal(state, want) {
			t.Errorf("%s -> %s: ended as %v", tc.cur, tc.want, state)
		}
	}
}
