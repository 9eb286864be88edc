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
	cur, err := ff.listRules(table, chain)
	if err != nil {
		return err
	}
	if len(cur) == 0 {
		// Nothing to compare with (a fresh node): append, and learn the listings from it.
		return ff.appendAndLearn(table, chain, rules)
	}
	want, err := ff.normalize(table, rules)
	if err != nil {
		return err
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

// listRules is chain's rules as iptables lists them, without the leading "-A CHAIN ".
func (ff *FirewallFamily) listRules(table, chain string) ([]string, error) {
	listed, err := ff.Rules(table, chain)
	if err != nil {
		return nil, fmt.Errorf("listing %s chain %s in %s: %w", ff.name, chain, table, err)
	}
	for i, l := range listed {
		listed[i] = strings.TrimPrefix(l, "-A "+chain+" ")
	}
	return listed, nil
}

// ruleKey is a wanted rule's key in the learned listings.
func ruleKey(table string, rule []string) string { return table + "\x00" + strings.Join(rule, "\x00") }

// normalize returns each rule as iptables lists it. Listings not learned yet are learned by
// appending those rules to the scratch chain once; the caller holds st.mu.
func (ff *FirewallFamily) normalize(table string, rules [][]string) ([]string, error) {
	var unknown [][]string
	for _, r := range rules {
		if _, ok := ff.st.normalized[ruleKey(table, r)]; !ok {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		if err := ff.learnInScratchChain(table, unknown); err != nil {
			return nil, err
		}
	}
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = ff.st.normalized[ruleKey(table, r)]
	}
	return out, nil
}

// learnInScratchChain learns the listings of rules in the scratch chain and removes it again.
// A rule iptables refuses fails here, before the real chain changes.
func (ff *FirewallFamily) learnInScratchChain(table string, rules [][]string) (err error) {
	if err := ff.ipt.ClearChain(table, normalizeChain); err != nil {
		return fmt.Errorf("%s scratch chain in %s: %w", ff.name, table, err)
	}
	defer func() {
		if derr := ff.ipt.ClearAndDeleteChain(table, normalizeChain); derr != nil && err == nil {
			err = fmt.Errorf("removing the %s scratch chain in %s: %w", ff.name, table, derr)
		}
	}()
	return ff.appendAndLearn(table, normalizeChain, rules)
}

// appendAndLearn appends rules to chain, which holds none, and learns from its listing how
// iptables lists each (it adds "-m tcp", reorders matches, writes /32).
func (ff *FirewallFamily) appendAndLearn(table, chain string, rules [][]string) error {
	for _, r := range rules {
		if err := ff.ipt.Append(table, chain, r...); err != nil {
			return fmt.Errorf("%s rule %q in %s chain %s: %w", ff.name, strings.Join(r, " "), table, chain, err)
		}
	}
	listed, err := ff.listRules(table, chain)
	if err != nil {
		return err
	}
	if len(listed) != len(rules) {
		return fmt.Errorf("%s chain %s in %s lists %d rules after %d were added to it empty", ff.name, chain, table, len(listed), len(rules))
	}
	if len(ff.st.normalized)+len(rules) > normalizedCacheMax {
		ff.st.normalized = map[string]string{}
	}
	for i, r := range rules {
		ff.st.normalized[ruleKey(table, r)] = listed[i]
	}
	return nil
}
