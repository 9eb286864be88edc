package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
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
			f := saveFields(line)
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

// saveFields splits an iptables-save line into words as iptables-restore does: a double-quoted
// string (a comment) is one word, with \" and \\ inside it unescaped. A comment mentioning
// "-j KOVN-..." is then no jump.
func saveFields(line string) []string {
	var fields []string
	var word strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && quoted && i+1 < len(line):
			i++
			word.WriteByte(line[i])
		case ch == '"':
			quoted, inWord = !quoted, true
		case (ch == ' ' || ch == '\t') && !quoted:
			if inWord {
				fields = append(fields, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		fields = append(fields, word.String())
	}
	return fields
}

// kovnRemovalRules is the iptables-restore --noflush input that removes every kovn chain of
// tables, in one transaction per table: each chain is declared (which, with --noflush, empties
// it, and with it the jumps between kovn chains), then the other chains' jumps to them are
// deleted rule by rule, then the chains. Chains kovn does not own are not touched. "" when
// there is nothing to remove.
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

// removeChains removes every kovn chain of one family, with the jumps to it, in all tables.
// A family whose tools are not installed, or IPv6 on a kernel without it, is not looked at:
// kovn-daemon could not have written chains there either.
func (c *cleanup) removeChains(ctx context.Context, fam natFamily) {
	save := fam.iptables + "-save"
	for _, tool := range []string{save, fam.restore} {
		if _, err := exec.LookPath(tool); err != nil {
			c.left("%s iptables chains: not looked at, %s is not installed", fam.name, tool)
			return
		}
	}
	if _, err := os.Stat("/proc/sys/net/ipv6"); !fam.is4 && errors.Is(err, fs.ErrNotExist) {
		c.left("%s iptables chains: not looked at, the kernel has no IPv6", fam.name)
		return
	}
	item := fmt.Sprintf("%s iptables chains %s*", fam.name, kovnChainPrefix)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, save)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.failed(item, fmt.Errorf("%s: %w: %s", save, err, strings.TrimSpace(stderr.String())))
		return
	}
	tables := parseKovnTables(string(out))
	rules := kovnRemovalRules(tables)
	if rules == "" {
		return
	}
	cmd = exec.CommandContext(ctx, fam.restore, "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.failed(item, fmt.Errorf("%s: %w: %s (input:\n%s)", fam.restore, err, strings.TrimSpace(string(out)), rules))
		return
	}
	for _, t := range tables {
		for _, line := range describeChains(t) {
			c.removed("%s iptables %s", fam.name, line)
		}
	}
}
