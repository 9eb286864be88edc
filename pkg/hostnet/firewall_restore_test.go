package hostnet

import (
	"slices"
	"strings"
	"testing"
)

// A quoted comment is one word, its escaped quotes unescaped, as iptables-restore reads it.
func TestRuleFields(t *testing.T) {
	got := RuleFields(`-A PREROUTING -m comment --comment "say \"-j KOVN-X\" here" -j ACCEPT`)
	want := []string{"-A", "PREROUTING", "-m", "comment", "--comment", `say "-j KOVN-X" here`, "-j", "ACCEPT"}
	if !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q", got, want)
	}
}

func TestParseRestore(t *testing.T) {
	text := "*nat\n:KOVN-A - [0:0]\n:KOVN-B - [0:0]\n-A KOVN-A -s 10.0.0.0/8 -m comment --comment \"ns/web:http\" -j MASQUERADE\n" +
		"-A KOVN-A -j RETURN\nCOMMIT\n*filter\n:KOVN-A - [0:0]\nCOMMIT\n"
	got, err := ParseRestore(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChainRules{
		{Table: "nat", Chain: "KOVN-A", Rules: [][]string{
			{"-s", "10.0.0.0/8", "-m", "comment", "--comment", "ns/web:http", "-j", "MASQUERADE"}, {"-j", "RETURN"}}},
		{Table: "nat", Chain: "KOVN-B"},
		{Table: "filter", Chain: "KOVN-A"},
	}
	if !slices.EqualFunc(got, want, func(a, b ChainRules) bool {
		return a.Table == b.Table && a.Chain == b.Chain && slices.EqualFunc(a.Rules, b.Rules, slices.Equal)
	}) {
		t.Errorf("parsed %q, want %q", got, want)
	}
	for _, bad := range []string{"-A KOVN-A -j RETURN\n", "*nat\n-A KOVN-X -j RETURN\nCOMMIT\n", "*nat\n-A\nCOMMIT\n", "*nat\n-I KOVN-A 1 -j RETURN\n"} {
		if _, err := ParseRestore(bad); err == nil {
			t.Errorf("%q parsed without an error", bad)
		}
	}
}

// TestRestoreWordRoundTrip: a word written for iptables-restore reads back as the same word.
func TestRestoreWordRoundTrip(t *testing.T) {
	words := []string{"-j", "ns/web:http", "a comment", `say "hi"`, `back\slash`, ""}
	var line []string
	for _, w := range words {
		line = append(line, restoreWord(w))
	}
	if got := RuleFields(strings.Join(line, " ")); !slices.Equal(got, words) {
		t.Errorf("RuleFields(%q) = %q, want %q", strings.Join(line, " "), got, words)
	}
}
