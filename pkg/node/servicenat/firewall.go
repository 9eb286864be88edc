package servicenat

import (
	"fmt"

	"github.com/kovn/kovn/pkg/hostnet"
)

// hostFirewall is the node's packet filter: every chain kovn-daemon owns is written through it
// (the clean-up removes them through a hostnet.Firewall of its own), so all of kovn waits for
// the xtables lock alike.
var hostFirewall = hostnet.NewFirewall()

// chainJump is a kovn chain in table and the built-in chain that jumps to it.
type chainJump struct{ table, from, chain string }

// applyChains makes sure each chain exists and is jumped to (first, so nothing earlier in the
// built-in chain decides before kovn does), then makes every chain rules declares (rendered as
// iptables-restore input) hold exactly its rules there, changing only what differs. Chains
// rules does not declare are left alone.
func applyChains(is4 bool, jumps []chainJump, rules string) error {
	fw, err := hostFirewall.Family(is4)
	if err != nil {
		return err
	}
	return applyChainsTo(fw, jumps, rules)
}

// applyChainsTo is applyChains on one family's handle.
func applyChainsTo(fw *hostnet.FirewallFamily, jumps []chainJump, rules string) error {
	chains, err := hostnet.ParseRestore(rules)
	if err != nil {
		return fmt.Errorf("kovn's own %s rules do not parse: %w", fw.Name(), err)
	}
	for _, j := range jumps {
		if err := fw.EnsureChain(j.table, j.chain); err != nil {
			return err
		}
		if err := fw.EnsureJump(j.table, j.from, j.chain); err != nil {
			return err
		}
	}
	for _, c := range chains { // all first: a rule may jump to a chain declared after its own
		if err := fw.EnsureChain(c.Table, c.Chain); err != nil {
			return err
		}
	}
	for _, c := range chains {
		if err := fw.SyncChain(c.Table, c.Chain, c.Rules); err != nil {
			return err
		}
	}
	return nil
}
