package hostnet

import (
	"fmt"
	"strings"
)

// kovn renders its chains as iptables-restore text (readable, diffable, what the unit tests
// compare); ParseRestore turns that text into the per-chain rule lists ReplaceChains applies.

// ChainRules is one chain's wanted rules: each rule's words after "-A CHAIN".
type ChainRules struct {
	Table, Chain string
	Rules        [][]string
}

// ParseRestore reads iptables-restore input made of "*table", ":CHAIN ..." declarations,
// "-A CHAIN ..." rules and "COMMIT", and returns every declared chain in order with its
// rules (a declared chain without rules is wanted empty).
func ParseRestore(text string) ([]ChainRules, error) {
	var out []ChainRules
	table := ""
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case line == "COMMIT":
			table = ""
		case table == "":
			return nil, fmt.Errorf("line %d outside a table: %q", n+1, line)
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) == 0 {
				return nil, fmt.Errorf("line %d: a chain without a name", n+1)
			}
			out = append(out, ChainRules{Table: table, Chain: f[0]})
		case strings.HasPrefix(line, "-A "):
			f := RuleFields(line)
			if len(f) < 3 || declared(out, table, f[1]) < 0 {
				return nil, fmt.Errorf("line %d: a rule of an undeclared chain or without a match: %q", n+1, line)
			}
			i := declared(out, table, f[1])
			out[i].Rules = append(out[i].Rules, f[2:])
		default:
			return nil, fmt.Errorf("line %d: not a chain declaration or an appended rule: %q", n+1, line)
		}
	}
	return out, nil
}

// declared is the index of table's chain in chains, -1 if it is not there.
func declared(chains []ChainRules, table, chain string) int {
	for i, c := range chains {
		if c.Table == table && c.Chain == chain {
			return i
		}
	}
	return -1
}

// RuleFields splits an iptables-save or -restore line into words as iptables-restore does: a
// double-quoted string (a comment) is one word, with \" and \\ inside it unescaped. A comment
// mentioning "-j KOVN-..." is then no jump.
func RuleFields(line string) []string {
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

// restoreWord is w as iptables-restore reads it back as one word (RuleFields' inverse): quoted
// when it holds a blank, a quote or a backslash, or is empty.
func restoreWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\"\\") {
		return w
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
}
