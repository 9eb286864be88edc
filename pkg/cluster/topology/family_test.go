package topology

import (
	"net/netip"
	"testing"
)

// TestSameFamily: the first address or prefix of the family asked for; none of it, false.
func TestSameFamily(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	addrs := []netip.Addr{netip.MustParseAddr("fd00::9"), netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.8")}
	if got, ok := SameFamily(addrs, v4); !ok || got != addrs[1] {
		t.Errorf("SameFamily(addrs, v4) = %v, %v", got, ok)
	}
	if got, ok := SameFamily(addrs, v6); !ok || got != addrs[0] {
		t.Errorf("SameFamily(addrs, v6) = %v, %v", got, ok)
	}
	prefixes := []netip.Prefix{netip.MustParsePrefix("169.254.99.5/30")}
	if got, ok := SameFamily(prefixes, v4); !ok || got != prefixes[0] {
		t.Errorf("SameFamily(prefixes, v4) = %v, %v", got, ok)
	}
	if got, ok := SameFamily(prefixes, v6); ok || got.IsValid() {
		t.Errorf("SameFamily(prefixes, v6) = %v, %v, want none", got, ok)
	}
}
