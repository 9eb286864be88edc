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
// place is kept; a missing one is inserted where it belongs, before whatever is there; a
// rule nothing further on wants is deleted right after the wanted rule before it is in
// place, so the replacement is always in before the stale rule goes and the chain is never
// empty unless want is.
func chainEdits(cur, want []string) []chainEdit {
	cur = slices.Clone(cur)
	later := map[string]int{} // how many of each rule want still needs from here on
	for _, w := range want {
		later[w]++
	}
	var edits []chainEdit
	dropStale := func(at int) {
		for at < len(cur) && later[cur[at]] == 0 {
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
		dropStale(i + 1)
	}
	for len(cur) > len(want) {
		edits = append(edits, chainEdit{pos: len(cur)})
		cur = cur[:len(cur)-1]
	}
	return edits
}
