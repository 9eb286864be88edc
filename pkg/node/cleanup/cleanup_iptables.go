package cleanup

import (
	"context"
	"fmt"
	"strings"

	"github.com/kovn/kovn/pkg/hostnet"
)

// kovnChainPrefix starts the name of every iptables chain kovn makes (nat.go, nodeports.go,
// hostports.go). The cleanup removes chains by this prefix, not by a list: a chain an older
// kovn made, and this one no longer knows, goes too.
const kovnChainPrefix = "KOVN-"

// kovnTable is kovn's part of one iptables table, as iptables-save shows it.
type kovnTable struct {
	name   string
	chains []string   // the KOVN-* chains
	jumps  []kovnJump // rules of other chains that jump (or go) to one of them
}

// kovnJump is a rule of another chain whose target is a kovn chain.
type kovnJump struct {
	from, to string
	rule     string // the rule as iptables-save wrote it: "-A PREROUTING ... -j KOVN-..."
}

// parseKovnTables reads iptables-save output (without counters) and returns the tables that
// hold kovn chains, in the order saved.
func parseKovnTables(save string) []kovnTable {
	var out []kovnTable
	cur := -1 // index in out of the table being read; -1 between tables
	for _, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "*"):
			out = append(out, kovnTable{name: line[1:]})
			cur = len(out) - 1
		case cur < 0:
		case line == "COMMIT":
			cur = -1
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 0 && strings.HasPrefix(f[0], kovnChainPrefix) {
				out[cur].chains = append(out[cur].chains, f[0])
			}
		case strings.HasPrefix(line, "-A "):
			f := hostnet.RuleFields(line)
			// Rules inside kovn chains go with their chain; only the other chains' jumps need a -D.
			if len(f) < 2 || strings.HasPrefix(f[1], kovnChainPrefix) {
				continue
			}
			if to := ruleTarget(f); strings.HasPrefix(to, kovnChainPrefix) {
				out[cur].jumps = append(out[cur].jumps, kovnJump{from: f[1], to: to, rule: line})
			}
		}
	}
	kept := out[:0]
	for _, t := range out {
		if len(t.chains) > 0 || len(t.jumps) > 0 {
			kept = append(kept, t)
		}
	}
	return kept
}

// ruleTarget is the chain or target a rule's -j / -g names ("" if none).
func ruleTarget(fields []string) string {
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-j", "--jump", "-g", "--goto":
			return fields[i+1]
		}
	}
	return ""
}

// kovnRemovalRules is the removal of every kovn chain of tables, written as iptables-restore
// --noflush input would say it (removeKovnTables does exactly these steps, and a failure
// reports them): per table each chain is emptied (and with it the jumps between kovn
// chains), then the other chains' jumps to them are deleted rule by rule, then the chains.
// Chains kovn does not own are not touched. "" when there is nothing to remove.
func kovnRemovalRules(tables []kovnTable) string {
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "*%s\n", t.name)
		for _, ch := range t.chains {
			fmt.Fprintf(&b, ":%s - [0:0]\n", ch)
		}
		for _, j := range t.jumps {
			fmt.Fprintf(&b, "-D%s\n", strings.TrimPrefix(j.rule, "-A"))
		}
		for _, ch := range t.chains {
			fmt.Fprintf(&b, "-X %s\n", ch)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// describeChains says, per chain, what the removal takes: "nat chain KOVN-NODEPORTS, jumped
// to from PREROUTING, OUTPUT".
func describeChains(t kovnTable) []string {
	var out []string
	for _, ch := range t.chains {
		s := t.name + " chain " + ch
		var from []string
		for _, j := range t.jumps {
			if j.to == ch {
				from = append(from, j.from)
			}
		}
		if len(from) > 0 {
			s += ", jumped to from " + strings.Join(from, ", ")
		}
		out = append(out, s)
	}
	return out
}

// firewallFamily is one IP family's packet filter, for the reports.
type firewallFamily struct {
	name string // "IPv4"
	is4  bool
}

var firewallFamilies = []firewallFamily{{name: "IPv4", is4: true}, {name: "IPv6", is4: false}}

// kovnTableNames are the tables the clean-up looks at: every table iptables-save shows.
var kovnTableNames = []string{"raw", "mangle", "nat", "filter", "security"}

// removeChains removes every kovn chain of one family, with the jumps to it, in all tables.
// A family whose tool is not installed, or IPv6 on a kernel without it, is not looked at:
// kovn-daemon could not have written chains there either.
func (c *cleanup) removeChains(_ context.Context, fam firewallFamily) {
	fw, err := c.firewall.Family(fam.is4)
	if err != nil {
		c.left("%s iptables chains: not looked at, %s is not installed", fam.name, c.firewall.Tool(fam.is4))
		return
	}
	if !fam.is4 && !hostnet.KernelHasIPv6() {
		c.left("%s iptables chains: not looked at, the kernel has no IPv6", fam.name)
		return
	}
	item := fmt.Sprintf("%s iptables chains %s*", fam.name, kovnChainPrefix)
	save, err := savedTables(fw)
	if err != nil {
		c.failed(item, err)
		return
	}
	tables := parseKovnTables(save)
	if len(tables) == 0 {
		return
	}
	if err := removeKovnTables(fw, tables); err != nil {
		c.failed(item, fmt.Errorf("%w (removal:\n%s)", err, kovnRemovalRules(tables)))
		return
	}
	for _, t := range tables {
		for _, line := range describeChains(t) {
			c.removed("%s iptables %s", fam.name, line)
		}
	}
}

// savedTables lists one family's tables chain by chain in iptables-save's layout, which
// parseKovnTables reads. A table the kernel does not have is left out.
func savedTables(fw *hostnet.FirewallFamily) (string, error) {
	var b strings.Builder
	for _, table := range kovnTableNames {
		chains, err := fw.Chains(table)
		if hostnet.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("listing %s chains of %s: %w", fw.Name(), table, err)
		}
		var rules []string
		for _, ch := range chains {
			r, err := fw.Rules(table, ch)
			if err != nil {
				return "", fmt.Errorf("listing %s chain %s of %s: %w", fw.Name(), ch, table, err)
			}
			rules = append(rules, r...)
		}
		fmt.Fprintf(&b, "*%s\n", table)
		for _, ch := range chains {
			fmt.Fprintf(&b, ":%s - [0:0]\n", ch)
		}
		for _, r := range rules {
			fmt.Fprintf(&b, "%s\n", r)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String(), nil
}

// removeKovnTables takes the steps kovnRemovalRules writes down, table by table.
func removeKovnTables(fw *hostnet.FirewallFamily, tables []kovnTable) error {
	for _, t := range tables {
		for _, ch := range t.chains {
			if err := fw.FlushChain(t.name, ch); err != nil {
				return fmt.Errorf("emptying %s chain %s: %w", t.name, ch, err)
			}
		}
		for _, j := range t.jumps {
			if err := fw.DeleteRule(t.name, j.from, hostnet.RuleFields(j.rule)[2:]...); err != nil {
				return fmt.Errorf("deleting %s jump %q: %w", t.name, j.rule, err)
			}
		}
		for _, ch := range t.chains {
			if err := fw.DeleteChain(t.name, ch); err != nil {
				return fmt.Errorf("deleting %s chain %s: %w", t.name, ch, err)
			}
		}
	}
	return nil
}
