package hostnet

import (
	"fmt"
	"os/exec"
	"strings"
)

// ReplaceChains makes each of table's chains hold exactly its rules, creating those that do not
// exist, in one iptables-restore transaction: packets meet the old rules or the new, never a
// mix, and a change costs one run of the tool however many rules it touches (a sync sits on
// the path of every endpoint change: a terminating pod must leave a node's rules before its
// preStop delay ends). Each chain is declared, which flushes it before its rules are appended
// (--noflush keeps every other chain and rule as it is); its counters start again at zero.
func (ff *FirewallFamily) ReplaceChains(table string, chains []ChainRules) error {
	var lines [][]string
	for _, c := range chains {
		lines = append(lines, []string{":" + c.Chain, "-", "[0:0]"})
	}
	for _, c := range chains {
		for _, r := range c.Rules {
			lines = append(lines, append([]string{"-A", c.Chain}, r...))
		}
	}
	ff.st.mu.Lock()
	defer ff.st.mu.Unlock()
	if err := ff.restore(table, lines); err != nil {
		return fmt.Errorf("replacing %s chains in %s: %w", ff.name, table, err)
	}
	return nil
}

// restore runs lines (iptables commands without the tool's name, "-I CHAIN 2 ...") on table in
// one `iptables-restore --noflush` run, in order: one transaction, all or nothing, and one run
// instead of one per rule (a sync sits on the path of every endpoint change; each iptables run
// reads the whole table). --noflush leaves every other rule and chain as it is; --wait waits
// for the xtables lock as go-iptables' runs do.
func (ff *FirewallFamily) restore(table string, lines [][]string) error {
	if len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, l := range lines {
		for i, w := range l {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(restoreWord(w))
		}
		b.WriteByte('\n')
	}
	b.WriteString("COMMIT\n")
	cmd := exec.Command(ff.tool+"-restore", "--noflush", "--wait")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s", ff.tool, err, strings.TrimSpace(string(out)))
	}
	return nil
}
