package v1alpha1

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ValidationError is one semantic problem in a spec. Reason is one of the Reason* constants, so
// the controller can put it straight into the Validated condition; Error() is the message.
// +kubebuilder:object:generate=false
type ValidationError struct {
	Field   string // JSON path below the object, e.g. "spec.gateway"
	Reason  string
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// ValidationErrors collects every problem found, not just the first: an operator fixing a spec
// should see all of them at once. errors.As(err, &*ValidationError) yields the first one.
// +kubebuilder:object:generate=false
type ValidationErrors []*ValidationError

func (l ValidationErrors) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.As/Is see the individual errors.
func (l ValidationErrors) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

func (l *ValidationErrors) add(field, reason, format string, args ...any) {
	*l = append(*l, &ValidationError{Field: field, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// err returns nil for an empty list: a nil ValidationErrors inside an error interface would be
// a non-nil error.
func (l ValidationErrors) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// ReasonOf returns the Reason of the first ValidationError in err, or ReasonValid for nil and
// ReasonValidationFailed for errors of another type.
func ReasonOf(err error) string {
	if err == nil {
		return ReasonValid
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return ReasonValidationFailed
}

// ParseAddr parses an IPv4 or IPv6 address with the same rules as the apiserver's CEL ip():
// no zone, no IPv4-mapped IPv6 form, no leading zeros (netip already rejects those).
func ParseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q: zones are not allowed", s)
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("%q: IPv4-mapped IPv6 addresses are not allowed", s)
	}
	return a, nil
}

// ParsePrefix parses a CIDR like CEL cidr() and additionally insists on canonical form, as the
// CRD rules do: no bits set after the prefix ("10.16.0.1/16" is almost always a typo for a
// gateway or a CIDR) and IPv6 written as Go/RFC 5952 print it (lower case, "::" compression), so
// CIDRs can be compared as strings, e.g. by the cidrBlock immutability rule.
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: IPv4-mapped IPv6 addresses are not allowed", s)
	}
	if p.Masked().String() != s {
		return netip.Prefix{}, fmt.Errorf("%q is not in canonical form (did you mean %s?)", s, p.Masked())
	}
	return p, nil
}

// IPRange is an inclusive range of addresses of one family.
// +kubebuilder:object:generate=false
type IPRange struct {
	First, Last netip.Addr
}

func (r IPRange) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + ".." + r.Last.String()
}

// Contains reports whether a lies in r.
func (r IPRange) Contains(a netip.Addr) bool {
	return r.First.BitLen() == a.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Overlaps reports whether r and o share at least one address.
func (r IPRange) Overlaps(o IPRange) bool {
	return r.First.BitLen() == o.First.BitLen() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// InPrefix reports whether the whole range lies inside p.
func (r IPRange) InPrefix(p netip.Prefix) bool {
	return p.Contains(r.First) && p.Contains(r.Last)
}

// PrefixRange returns the first and last address of p.
func PrefixRange(p netip.Prefix) IPRange {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(b)
	return IPRange{First: p.Addr(), Last: last}
}

// ParseIPRange parses "a" or "a..b" (inclusive, a <= b, one family).
func ParseIPRange(s string) (IPRange, error) {
	first, last, isRange := strings.Cut(s, "..")
	a, err := ParseAddr(first)
	if err != nil {
		return IPRange{}, err
	}
	if !isRange {
		return IPRange{First: a, Last: a}, nil
	}
	b, err := ParseAddr(last)
	if err != nil {
		return IPRange{}, err
	}
	if a.BitLen() != b.BitLen() {
		return IPRange{}, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
	}
	if a.Compare(b) > 0 {
		return IPRange{}, fmt.Errorf("range %q is reversed (first address after last)", s)
	}
	return IPRange{First: a, Last: b}, nil
}

// ParsePoolEntry parses an IPPool entry: an address, a range "a..b" or a CIDR.
func ParsePoolEntry(s string) (IPRange, error) {
	if strings.Contains(s, "/") {
		p, err := ParsePrefix(s)
		if err != nil {
			return IPRange{}, err
		}
		return PrefixRange(p), nil
	}
	return ParseIPRange(s)
}

// familyName is "IPv4" or "IPv6", for messages.
func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// splitList splits a comma-separated field. Whitespace is an error rather than trimmed, so the
// Go rules accept exactly what the CEL rules accept.
func splitList(s string) ([]string, error) {
	if strings.ContainsAny(s, " \t\n\r") {
		return nil, fmt.Errorf("%q contains whitespace", s)
	}
	return strings.Split(s, ","), nil
}
