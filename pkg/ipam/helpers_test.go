package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/kovn/kovn/api/v1alpha1"
)

// addSpec registers a subnet the way the controller will: from a SubnetSpec through the
// v1alpha1 parsers.
func addSpec(t testing.TB, m *IPAM, name string, spec v1alpha1.SubnetSpec) {
	t.Helper()
	if err := spec.Validate(); err != nil {
		t.Fatalf("spec of %s: %v", name, err)
	}
	cidrs, err := spec.CIDRs()
	if err != nil {
		t.Fatal(err)
	}
	gws, err := spec.EffectiveGateways()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := spec.ExcludeRanges()
	if err != nil {
		t.Fatal(err)
	}
	var exclude []Range
	for _, r := range ex {
		exclude = append(exclude, Range(r))
	}
	if err := m.AddOrUpdateSubnet(name, cidrs, gws, exclude); err != nil {
		t.Fatalf("AddOrUpdateSubnet(%s): %v", name, err)
	}
}

// newWith returns an IPAM holding one subnet "sn" with cidrBlock and excludeIps.
func newWith(t testing.TB, cidrBlock string, exclude ...string) *IPAM {
	t.Helper()
	m := New()
	addSpec(t, m, "sn", v1alpha1.SubnetSpec{CIDRBlock: cidrBlock, ExcludeIPs: exclude})
	return m
}

func addr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := v1alpha1.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addrs(t testing.TB, ss ...string) []netip.Addr {
	t.Helper()
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = addr(t, s)
	}
	return out
}

func ranges(t testing.TB, ss ...string) []Range {
	t.Helper()
	out := make([]Range, len(ss))
	for i, s := range ss {
		r, err := v1alpha1.ParsePoolEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = Range(r)
	}
	return out
}

func prefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// mustAlloc allocates or fails the test.
func mustAlloc(t testing.TB, m *IPAM, req Request) Allocation {
	t.Helper()
	a, err := m.Allocate(req)
	if err != nil {
		t.Fatalf("Allocate(%+v): %v", req, err)
	}
	return a
}

// ipsString renders addresses as "a,b" for compact comparisons.
func ipsString(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, a := range ips {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// wantErr checks that err wraps sentinel (nil: no error) and mentions fragment.
func wantErr(t testing.TB, err, sentinel error, fragment string) {
	t.Helper()
	switch {
	case sentinel == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case sentinel == nil:
	case err == nil:
		t.Fatalf("want %v error, got nil", sentinel)
	case !errors.Is(err, sentinel):
		t.Fatalf("error %q does not wrap %q", err, sentinel)
	case !strings.Contains(err.Error(), fragment):
		t.Fatalf("error %q does not mention %q", err, fragment)
	}
}

func owner(i int) string { return fmt.Sprintf("ns/pod-%d", i) }
