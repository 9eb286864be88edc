package servicenat

import (
	"fmt"
	"slices"

	"github.com/kovn/kovn/pkg/hostnet"
)

// hostFirewall is the node's packet filter: every chain kovn-daemon owns is written through it
// (the clean-up removes them through a hostnet.Firewall of its own), so all of kovn waits for
// the xtables lock alike.
var hostFirewall = hostnet.NewFirewall()

// chainJump is a kovn chain in table and the built-in chain that jumps to it.
type chainJump struct{ table, from, chain string }

// applyChains makes every chain rules declares (rendered as iptables-restore input) hold
// exactly its rules, then makes sure each chain of jumps is jumped to (first, so nothing earlier
// in the built-in chain decides before kovn does). Chains rules does not declare are left alone.
func applyChains(is4 bool, jumps []chainJump, rules string) error {
	fw, err := hostFirewall.Family(is4)
	if err != nil {
		return err
	}
	return applyChainsTo(fw, jumps, rules)
}

// applyChainsTo is applyChains on one family's handle: each table's chains replaced in one
// transaction (created when missing), then the jumps to them made sure of. Every chain jumped
// to must be declared in rules.
func applyChainsTo(fw *hostnet.FirewallFamily, jumps []chainJump, rules string) error {
	chains, err := hostnet.ParseRestore(rules)
	if err != nil {
		return fmt.Errorf("kovn's own %s rules do not parse: %w", fw.Name(), err)
	}
	byTable, tables := map[string][]hostnet.ChainRules{}, []string{}
	for _, c := range chains {
		if _, ok := byTable[c.Table]; !ok {
			tables = append(tables, c.Table)
		}
		byTable[c.Table] = append(byTable[c.Table], c)
	}
	for _, table := range tables {
		if err := fw.ReplaceChains(table, byTable[table]); err != nil {
			return err
		}
	}
	for _, j := range jumps { // a jump's chain is one the rules replace, so it exists by now
		if !slices.ContainsFunc(byTable[j.table], func(c hostnet.ChainRules) bool { return c.Chain == j.chain }) {
			return fmt.Errorf("kovn's own %s rules do not declare %s in %s, which %s jumps to", fw.Name(), j.chain, j.table, j.from)
		}
	}
	for _, j := range jumps {
		if err := fw.EnsureJump(j.table, j.from, j.chain); err != nil {
			return err
		}
	}
	return nil
}
