package hostnet

import (
	"fmt"
	"strings"
)

// SyncChain makes chain's rules in table equal to rules (each a rule's words after
// "-A CHAIN"), changing only the differences: the current rules are listed, each wanted rule
// is kept where it already is or inserted at its place, and stale rules are deleted only
// after their replacement is in, so a chain that should hold rules never passes through
// empty, and a rule that stays keeps its counters. (A rule moving ahead of one it used to
// follow is inserted anew at its place and its old copy deleted.)
func (ff *FirewallFamily) SyncChain(table, chain string, rules [][]string) error {
	ff.st.mu.Lock()
	defer ff.st.mu.Unlock()
	want, err := ff.normalize(table, rules)
	if err != nil {
		return err
	}
	listed, err := ff.Rules(table, chain)
	if err != nil {
		return fmt.Errorf("listing %s chain %s in %s: %w", ff.name, chain, table, err)
	}
	cur := make([]string, len(listed))
	for i, l := range listed {
		cur[i] = strings.TrimPrefix(l, "-A "+chain+" ")
	}
	for _, e := range chainEdits(cur, want) {
		if e.insert {
			err = ff.ipt.Insert(table, chain, e.pos, rules[e.rule]...)
		} else {
			err = ff.ipt.DeleteById(table, chain, e.pos)
		}
		if err != nil {
			return fmt.Errorf("syncing %s chain %s in %s: %w", ff.name, chain, table, err)
		}
	}
	return nil
}

// normalize returns each rule as iptables lists it. Listings not learned yet are learned by
// appending those rules to the scratch chain once and listing it; the caller holds st.mu.
func (ff *FirewallFamily) normalize(table string, rules [][]string) ([]string, error) {
	key := func(r []string) string { return table + "\x00" + strings.Join(r, "\x00") }
	var unknown [][]string
	for _, r := range rules {
		if _, ok := ff.st.normalized[key(r)]; !ok {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		if len(ff.st.normalized)+len(unknown) > normalizedCacheMax {
			ff.st.normalized = map[string]string{}
		}
		if err := ff.learnListings(table, unknown, key); err != nil {
			return nil, err
		}
	}
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = ff.st.normalized[key(r)]
	}
	return out, nil
}

// learnListings appends rules to the scratch chain, reads back how iptables lists each and
// removes the chain again. A rule iptables refuses fails here, before the real chain changes.
func (ff *FirewallFamily) learnListings(table string, rules [][]string, key func([]string) string) (err error) {
	if err := ff.ipt.ClearChain(table, normalizeChain); err != nil {
		return fmt.Errorf("%s scratch chain in %s: %w", ff.name, table, err)
	}
	defer func() {
		if derr := ff.ipt.ClearAndDeleteChain(table, normalizeChain); derr != nil && err == nil {
			err = fmt.Errorf("removing the %s scratch chain in %s: %w", ff.name, table, derr)
		}
	}()
	for _, r := range rules {
		if err := ff.ipt.Append(table, normalizeChain, r...); err != nil {
			return fmt.Errorf("%s rule %q in %s: %w", ff.name, strings.Join(r, " "), table, err)
		}
	}
	listed, err := ff.Rules(table, normalizeChain)
	if err != nil {
		return fmt.Errorf("listing the %s scratch chain in %s: %w", ff.name, table, err)
	}
	if len(listed) != len(rules) {
		return fmt.Errorf("%s scratch chain in %s lists %d rules, %d were added", ff.name, table, len(listed), len(rules))
	}
	for i, r := range rules {
		ff.st.normalized[key(r)] = strings.TrimPrefix(listed[i], "-A "+normalizeChain+" ")
	}
	return nil
}
