// Package match checks OVN match expressions (the language of ACL and Logical_Flow matches,
// ovn-sb(5)) before kovn writes one an admin gave it: northd would otherwise drop an ACL it
// cannot parse and only say so in its own log. It knows the fields an ACL on a logical switch
// may use, their kinds (a predicate such as tcp, an integer such as tcp.dst, an address such
// as ip4.src, a string such as inport), the operators each allows and the values each takes.
package match

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// kind is what a field holds.
type kind int

const (
	predicate kind = iota // boolean: used bare (tcp, ct.new)
	integer               // ordinal, any relational operator (tcp.dst, ip.ttl)
	bits                  // a bit field: == or != with a value or value/mask (tcp.flags, eth.type)
	ip4                   // IPv4 address or prefix (ip4.src)
	ip6                   // IPv6 address or prefix
	mac                   // Ethernet address, optionally masked
	str                   // a quoted string, or a port group (inport, outport)
)

// field is one symbol: its kind and, for integers, its width in bits.
type field struct {
	kind  kind
	width int
}

var fields = map[string]field{
	"eth.src": {mac, 48}, "eth.dst": {mac, 48}, "eth.type": {bits, 16}, "eth.bcast": {predicate, 0}, "eth.mcast": {predicate, 0},
	"vlan.tci": {bits, 16}, "vlan.vid": {integer, 12}, "vlan.pcp": {integer, 3}, "vlan.present": {predicate, 0},
	"ip": {predicate, 0}, "ip4": {predicate, 0}, "ip6": {predicate, 0},
	"ip.proto": {integer, 8}, "ip.dscp": {integer, 6}, "ip.ecn": {integer, 2}, "ip.ttl": {integer, 8},
	"ip.frag": {predicate, 0}, "ip.is_frag": {predicate, 0}, "ip.later_frag": {predicate, 0}, "ip.first_frag": {predicate, 0},
	"ip4.src": {ip4, 32}, "ip4.dst": {ip4, 32}, "ip4.mcast": {predicate, 0},
	"ip6.src": {ip6, 128}, "ip6.dst": {ip6, 128}, "ip6.label": {integer, 20}, "ip6.mcast": {predicate, 0},
	"arp": {predicate, 0}, "arp.op": {integer, 16}, "arp.spa": {ip4, 32}, "arp.tpa": {ip4, 32}, "arp.sha": {mac, 48}, "arp.tha": {mac, 48},
	"nd": {predicate, 0}, "nd_ns": {predicate, 0}, "nd_na": {predicate, 0}, "nd_rs": {predicate, 0}, "nd_ra": {predicate, 0},
	"nd.target": {ip6, 128}, "nd.sll": {mac, 48}, "nd.tll": {mac, 48},
	"icmp": {predicate, 0}, "icmp4": {predicate, 0}, "icmp4.type": {integer, 8}, "icmp4.code": {integer, 8},
	"icmp6": {predicate, 0}, "icmp6.type": {integer, 8}, "icmp6.code": {integer, 8},
	"tcp": {predicate, 0}, "tcp.src": {integer, 16}, "tcp.dst": {integer, 16}, "tcp.flags": {bits, 12},
	"udp": {predicate, 0}, "udp.src": {integer, 16}, "udp.dst": {integer, 16},
	"sctp": {predicate, 0}, "sctp.src": {integer, 16}, "sctp.dst": {integer, 16},
	"igmp": {predicate, 0}, "mldv1": {predicate, 0}, "mldv2": {predicate, 0},
	"inport": {str, 0}, "outport": {str, 0},
	"ct.new": {predicate, 0}, "ct.est": {predicate, 0}, "ct.rel": {predicate, 0}, "ct.rpl": {predicate, 0},
	"ct.inv": {predicate, 0}, "ct.trk": {predicate, 0},
}

// Error is why a match is refused, with the byte offset it was found at.
type Error struct {
	Offset int
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("at %d: %s", e.Offset, e.Reason) }

// Refs are the address sets ($name) and port groups (@name) a match names: OVN refuses a
// match whose set does not exist, so the caller checks these against NB.
type Refs struct {
	AddressSets, PortGroups []string
}

// Check parses m and reports the first problem, or the sets it refers to.
func Check(m string) (Refs, error) {
	toks, err := lex(m)
	if err != nil {
		return Refs{}, err
	}
	p := &parser{toks: toks}
	if len(toks) == 1 { // only the end
		return Refs{}, &Error{0, "empty match"}
	}
	if err := p.or(); err != nil {
		return Refs{}, err
	}
	if t := p.peek(); t.typ != tEnd {
		return Refs{}, &Error{t.off, fmt.Sprintf("unexpected %q", t.text)}
	}
	return p.refs, nil
}

type parser struct {
	toks []token
	pos  int
	refs Refs
	// negated: an odd number of enclosing `!`. Nominal fields and predicates may then not be
	// used (northd: "Nominal field ip.proto may only be tested for equality (taking enclosing
	// `!' operators into account)").
	negated bool
}

// nominal are the fields northd tests for equality only, and the predicates that expand to
// such a test (ip4 is eth.type == 0x800, tcp is ip.proto == 6), which it takes only positively.
var nominal = map[string]bool{
	"ip.proto": true, "eth.type": true, "inport": true, "outport": true,
	"ip": true, "ip4": true, "ip6": true, "arp": true, "tcp": true, "udp": true, "sctp": true, "igmp": true,
	"icmp": true, "icmp4": true, "icmp6": true, "nd": true, "nd_ns": true, "nd_na": true, "nd_rs": true, "nd_ra": true,
	"mldv1": true, "mldv2": true,
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token { t := p.toks[p.pos]; p.pos++; return t }

func (p *parser) or() error {
	if err := p.and(); err != nil {
		return err
	}
	for p.peek().is(tOp, "||") {
		p.next()
		if err := p.and(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) and() error {
	if err := p.not(); err != nil {
		return err
	}
	for p.peek().is(tOp, "&&") {
		p.next()
		if err := p.not(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) not() error {
	if p.peek().is(tOp, "!") {
		p.next()
		p.negated = !p.negated
		err := p.not()
		p.negated = !p.negated
		return err
	}
	return p.primary()
}

func (p *parser) primary() error {
	t := p.next()
	switch {
	case t.is(tOp, "("):
		if err := p.or(); err != nil {
			return err
		}
		if c := p.next(); !c.is(tOp, ")") {
			return &Error{c.off, "missing )"}
		}
		return nil
	case t.typ == tValue && (t.text == "1" || t.text == "0"):
		return nil // OVN's true and false
	case t.typ != tName:
		return &Error{t.off, fmt.Sprintf("expected a field, found %q", t.text)}
	}
	name, sub := t.text, ""
	if i := strings.IndexByte(name, '['); i >= 0 {
		name, sub = name[:i], name[i:]
	}
	f, ok := fields[name]
	if !ok {
		return &Error{t.off, fmt.Sprintf("unknown field %q", name)}
	}
	if sub != "" {
		if err := checkSubfield(sub, f); err != nil {
			return &Error{t.off, fmt.Sprintf("%s%s: %v", name, sub, err)}
		}
		f = field{bits, 0}
	}
	op := p.peek()
	if !op.is(tOp, "==", "!=", "<", "<=", ">", ">=") {
		if f.kind != predicate {
			return &Error{t.off, fmt.Sprintf("%s is not a predicate: compare it (e.g. %s == ...)", name, name)}
		}
		if nominal[name] && p.negated {
			return &Error{t.off, fmt.Sprintf("%s may only be tested positively (OVN refuses !%s)", name, name)}
		}
		return nil
	}
	if nominal[name] && sub == "" && (op.text != "==" && op.text != "!=") {
		return &Error{op.off, fmt.Sprintf("%s takes only == (OVN calls it nominal), not %s", name, op.text)}
	}
	if nominal[name] && sub == "" && (op.text == "!=") != p.negated {
		return &Error{op.off, fmt.Sprintf("%s may only be tested for equality, taking enclosing ! into account (OVN calls it nominal)", name)}
	}
	if f.kind == predicate {
		return &Error{op.off, fmt.Sprintf("%s is a predicate: use it bare or negated, not with %s", name, op.text)}
	}
	p.next()
	relational := op.text != "==" && op.text != "!="
	if relational && f.kind != integer {
		return &Error{op.off, fmt.Sprintf("%s takes only == and != (%s is for ordinal fields such as tcp.dst)", name, op.text)}
	}
	if p.peek().is(tOp, "{") {
		if relational {
			return &Error{op.off, fmt.Sprintf("a set takes only == and !=, not %s", op.text)}
		}
		return p.set(name, f)
	}
	return p.value(name, f, relational)
}

func (p *parser) set(name string, f field) error {
	open := p.next()
	n := 0
	for {
		if p.peek().is(tOp, "}") {
			p.next()
			if n == 0 {
				return &Error{open.off, "empty set"}
			}
			return nil
		}
		if n > 0 {
			if c := p.next(); !c.is(tOp, ",") {
				return &Error{c.off, "expected , or } in a set"}
			}
		}
		if err := p.value(name, f, false); err != nil {
			return err
		}
		n++
	}
}

func (p *parser) value(name string, f field, relational bool) error {
	t := p.next()
	switch t.typ {
	case tAddrSet:
		if f.kind != ip4 && f.kind != ip6 && f.kind != mac {
			return &Error{t.off, fmt.Sprintf("address set %s compared with %s, which holds no address", t.text, name)}
		}
		p.refs.AddressSets = append(p.refs.AddressSets, t.text[1:])
		return nil
	case tPortGroup:
		if f.kind != str {
			return &Error{t.off, fmt.Sprintf("port group %s compared with %s (only inport and outport)", t.text, name)}
		}
		p.refs.PortGroups = append(p.refs.PortGroups, t.text[1:])
		return nil
	case tString:
		if f.kind != str {
			return &Error{t.off, fmt.Sprintf("%s takes no string", name)}
		}
		return nil
	case tValue:
		if f.kind == str {
			return &Error{t.off, fmt.Sprintf("%s takes a quoted port name or a port group", name)}
		}
		if err := checkValue(t.text, f, relational); err != nil {
			return &Error{t.off, fmt.Sprintf("%s %s: %v", name, t.text, err)}
		}
		return nil
	}
	return &Error{t.off, fmt.Sprintf("expected a value for %s, found %q", name, t.text)}
}

// checkValue checks one constant against the field's kind.
func checkValue(v string, f field, relational bool) error {
	val, mask, masked := strings.Cut(v, "/")
	switch f.kind {
	case ip4, ip6:
		a, err := netip.ParseAddr(val)
		if err != nil || a.Is4() != (f.kind == ip4) || a.Is4In6() {
			return fmt.Errorf("not an IPv%d address", map[bool]int{true: 4, false: 6}[f.kind == ip4])
		}
		if masked {
			if bits, err := strconv.Atoi(mask); err != nil || bits < 0 || bits > a.BitLen() {
				if _, err := netip.ParseAddr(mask); err != nil {
					return fmt.Errorf("bad prefix length or mask %q", mask)
				}
			} else if pfx := netip.PrefixFrom(a, bits); pfx.Masked().Addr() != a {
				return fmt.Errorf("host bits set beyond /%d (OVN refuses it): write %s", bits, pfx.Masked())
			}
		}
		return nil
	case mac:
		if _, err := net.ParseMAC(val); err != nil || len(val) != 17 {
			return fmt.Errorf("not an Ethernet address")
		}
		if masked {
			if _, err := net.ParseMAC(mask); err != nil {
				return fmt.Errorf("bad Ethernet mask %q", mask)
			}
		}
		return nil
	}
	if masked && relational {
		return fmt.Errorf("a masked value takes only == and !=")
	}
	n, err := strconv.ParseUint(val, 0, 64)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if masked {
		if _, err := strconv.ParseUint(mask, 0, 64); err != nil {
			return fmt.Errorf("bad mask %q", mask)
		}
	}
	if f.width > 0 && f.width < 64 && n >= 1<<f.width {
		return fmt.Errorf("does not fit in %d bits", f.width)
	}
	return nil
}

// checkSubfield checks [N] or [N..M] on an integer or bit field.
func checkSubfield(sub string, f field) error {
	if f.kind != integer && f.kind != bits {
		return fmt.Errorf("only integer fields have bits")
	}
	in := strings.TrimSuffix(strings.TrimPrefix(sub, "["), "]")
	lo, hi, isRange := strings.Cut(in, "..")
	l, err1 := strconv.Atoi(lo)
	h := l
	var err2 error
	if isRange {
		h, err2 = strconv.Atoi(hi)
	}
	if err1 != nil || err2 != nil || l < 0 || h < l || (f.width > 0 && h >= f.width) {
		return fmt.Errorf("bad bit range")
	}
	return nil
}
