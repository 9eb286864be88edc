package annotation

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestPeerGatewaysRoundTrip(t *testing.T) {
	in := map[string][]netip.Addr{
		"az3": {netip.MustParseAddr("172.30.3.11")},
		"az2": {netip.MustParseAddr("172.30.2.12"), netip.MustParseAddr("172.30.2.11"), netip.MustParseAddr("172.30.2.11")},
		"az4": nil,
	}
	s := FormatPeerGateways(in)
	if s != "az2=172.30.2.11,172.30.2.12;az3=172.30.3.11" {
		t.Fatalf("formatted %q", s)
	}
	out, err := ParsePeerGateways(s)
	want := map[string][]netip.Addr{"az2": {netip.MustParseAddr("172.30.2.11"), netip.MustParseAddr("172.30.2.12")},
		"az3": {netip.MustParseAddr("172.30.3.11")}}
	if err != nil || !reflect.DeepEqual(out, want) {
		t.Fatalf("parsed %v, %v", out, err)
	}
	for _, bad := range []string{"az2", "=1.2.3.4", "az2=1.2.3.x"} {
		if _, err := ParsePeerGateways(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if got := FormatPeersDown([]string{"az3", "az2", "az3"}); got != "az2,az3" || len(ParsePeersDown("")) != 0 {
		t.Errorf("peers down %q", got)
	}
}
