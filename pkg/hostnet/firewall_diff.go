package hostnet

import "slices"

// chainEdit is one step turning a chain's rules into the wanted ones: insert want[rule] at
// 1-based position pos, or delete the rule at pos.
type chainEdit struct {
	insert bool
	pos    int
	rule   int
}

// chainEdits turns cur into want with inserts and deletes by position. A rule already in
// place is kept; a missing one is inserted where it belongs, before whatever is there. A run
// of rules nothing further on wants is deleted only once what follows it is right: the next
// wanted rule is already there behind it, or every wanted rule is in place. Until then it
// stays, so traffic it catches is never left to fall through a chain half rewritten: a
// NodePort whose last, unconditional DNAT rule is replaced by new ones keeps the old one
// until the new ones are in (deleting it first refused connections during a rollout). The
// chain is never empty unless want is.
func chainEdits(cur, want []string) []chainEdit {
	cur = slices.Clone(cur)
	later := map[string]int{} // how many of each rule want still needs from here on
	for _, w := range want {
		later[w]++
	}
	var edits []chainEdit
	// dropStale deletes the stale run at cur[at:] if next (want's next index) allows it.
	dropStale := func(at, next int) {
		end := at
		for end < len(cur) && later[cur[end]] == 0 {
			end++
		}
		if end == at || (next < len(want) && (end == len(cur) || cur[end] != want[next])) {
			return
		}
		for ; end > at; end-- {
			edits = append(edits, chainEdit{pos: at + 1})
			cur = slices.Delete(cur, at, at+1)
		}
	}
	for i, w := range want {
		later[w]--
		if i >= len(cur) || cur[i] != w {
			edits = append(edits, chainEdit{insert: true, pos: i + 1, rule: i})
			cur = slices.Insert(cur, i, w)
		}
		dropStale(i+1, i+1)
	}
	for len(cur) > len(want) {
		edits = append(edits, chainEdit{pos: len(cur)})
		cur = cur[:len(cur)-1]
	}
	return edits
}
