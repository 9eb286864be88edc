package match

import (
	"fmt"
	"strings"
)

type tokType int

const (
	tEnd       tokType = iota
	tOp                // == != < <= > >= && || ! ( ) { } ,
	tName              // a field, with an optional [bits] subscript
	tValue             // a number, address or masked value
	tString            // "port name"
	tAddrSet           // $name
	tPortGroup         // @name
)

type token struct {
	typ  tokType
	text string
	off  int
}

// is reports whether t is of typ and, when texts are given, one of them.
func (t token) is(typ tokType, texts ...string) bool {
	if t.typ != typ {
		return false
	}
	if len(texts) == 0 {
		return true
	}
	for _, x := range texts {
		if t.text == x {
			return true
		}
	}
	return false
}

var twoCharOps = []string{"==", "!=", "<=", ">=", "&&", "||"}

// lex splits a match into tokens. Field names start with a letter; values start with a
// digit, or are IPv6 addresses (hex digits and colons); a value runs until a space, an
// operator character or a brace, so "10.0.0.0/8", "fd00::/64" and "0x1/0x3" stay whole.
func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
			continue
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, &Error{i, "unterminated string"}
			}
			out = append(out, token{tString, s[i : j+1], i})
			i = j + 1
			continue
		}
		if op := opAt(s, i); op != "" {
			out = append(out, token{tOp, op, i})
			i += len(op)
			continue
		}
		j := i
		for j < len(s) && !strings.ContainsRune(" \t\n\"(){},!=<>&|", rune(s[j])) {
			j++
		}
		word := s[i:j]
		if word == "" {
			return nil, &Error{i, fmt.Sprintf("unexpected %q", string(c))}
		}
		typ := tValue
		switch {
		case c == '$':
			typ = tAddrSet
		case c == '@':
			typ = tPortGroup
		case isLetter(c) && !looksLikeIPv6(word):
			typ = tName
		}
		if (typ == tAddrSet || typ == tPortGroup) && len(word) == 1 {
			return nil, &Error{i, "a set reference needs a name"}
		}
		out = append(out, token{typ, word, i})
		i = j
	}
	return append(out, token{tEnd, "end of match", len(s)}), nil
}

func opAt(s string, i int) string {
	for _, op := range twoCharOps {
		if strings.HasPrefix(s[i:], op) {
			return op
		}
	}
	switch s[i] {
	case '<', '>', '!', '(', ')', '{', '}', ',':
		return s[i : i+1]
	}
	return ""
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

// looksLikeIPv6: a word of hex digits with a colon ("fd00::1", "abcd::/64") is a value.
func looksLikeIPv6(w string) bool {
	if !strings.Contains(w, ":") {
		return false
	}
	v, _, _ := strings.Cut(w, "/")
	for _, r := range v {
		if !(r == ':' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}
