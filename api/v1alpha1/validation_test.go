package v1alpha1

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wantErr checks err against an expected reason and message fragment; reason "" means no error.
func wantErr(t *testing.T, err error, reason, fragment string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("expected %s error containing %q, got nil", reason, fragment)
	}
	if got := ReasonOf(err); got != reason {
		t.Errorf("reason = %s, want %s (error: %v)", got, reason, err)
	}
	if !strings.Contains(err.Error(), fragment) {
		t.Errorf("error %q does not contain %q", err, fragment)
	}
}

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"10.0.0.1", true},
		{"fd00::1", true},
		{"", false},
		{"10.0.0.256", false},
		{"010.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"fe80::1%eth0", false},
		{"10.0.0.0/8", false},
	} {
		_, err := ParseAddr(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseAddr(%q) err=%v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	for _, tc := range []struct {
		in, frag string // frag "" means valid
	}{
		{"10.16.0.0/16", ""},
		{"fd00:10:16::/64", ""},
		{"0.0.0.0/0", ""},
		{"10.16.0.1/16", "did you mean 10.16.0.0/16"},
		{"FD00:10:16::/64", "did you mean fd00:10:16::/64"},
		{"fd00:10:16:0::/64", "did you mean fd00:10:16::/64"},
		{"10.16.0.0", "not a CIDR"},
		{"10.16.0.0/33", "not a CIDR"},
		{"::ffff:10.0.0.0/104", "IPv4-mapped"},
		{" 10.16.0.0/16", "not a CIDR"},
	} {
		_, err := ParsePrefix(tc.in)
		if tc.frag == "" {
			if err != nil {
				t.Errorf("ParsePrefix(%q): %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("ParsePrefix(%q) err=%v, want containing %q", tc.in, err, tc.frag)
		}
	}
}

func TestParseIPRangeAndPoolEntry(t *testing.T) {
	for _, tc := range []struct {
		in          string
		pool        bool // parse with ParsePoolEntry
		first, last string
		frag        string
	}{
		{in: "10.0.0.5", first: "10.0.0.5", last: "10.0.0.5"},
		{in: "10.0.0.5..10.0.0.9", first: "10.0.0.5", last: "10.0.0.9"},
		{in: "fd00::1..fd00::ff", first: "fd00::1", last: "fd00::ff"},
		{in: "10.0.0.9..10.0.0.5", frag: "reversed"},
		{in: "10.0.0.1..fd00::1", frag: "mixes"},
		{in: "10.0.0.1..", frag: "not an IP"},
		{in: "10.0.0.1..10.0.0.2..10.0.0.3", frag: "not an IP"},
		{in: "10.0.0.0/24", frag: "not an IP"}, // CIDRs only in pools
		{in: "10.0.0.0/24", pool: true, first: "10.0.0.0", last: "10.0.0.255"},
		{in: "fd00::/120", pool: true, first: "fd00::", last: "fd00::ff"},
		{in: "10.0.0.1/24", pool: true, frag: "canonical"},
		{in: "10.0.0.1..10.0.0.3", pool: true, first: "10.0.0.1", last: "10.0.0.3"},
	} {
		parse := ParseIPRange
		if tc.pool {
			parse = ParsePoolEntry
		}
		r, err := parse(tc.in)
		if tc.frag != "" {
			if err == nil || !strings.Contains(err.Error(), tc.frag) {
				t.Errorf("parse(%q) = %v, %v; want error containing %q", tc.in, r, err, tc.frag)
			}
			continue
		}
		want := IPRange{netip.MustParseAddr(tc.first), netip.MustParseAddr(tc.last)}
		if err != nil || r != want {
			t.Errorf("parse(%q) = %v, %v; want %v", tc.in, r, err, want)
		}
	}
}

func TestIPRangeOps(t *testing.T) {
	rng := func(s string) IPRange {
		r, err := ParsePoolEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10.0.0.1..10.0.0.10", "10.0.0.10..10.0.0.20", true}, // shared end point
		{"10.0.0.1..10.0.0.10", "10.0.0.11..10.0.0.20", false},
		{"10.0.0.0/24", "10.0.0.128", true},
		{"10.0.0.0/24", "10.0.1.0/24", false},
		{"0.0.0.0/0", "::/0", false}, // families never overlap
		{"fd00::/64", "fd00::5..fd00::7", true},
	} {
		if got := rng(tc.a).Overlaps(rng(tc.b)); got != tc.want {
			t.Errorf("%s overlaps %s = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := rng(tc.b).Overlaps(rng(tc.a)); got != tc.want {
			t.Errorf("%s overlaps %s = %v, want %v (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
	r := rng("10.0.0.5..10.0.0.9")
	for a, want := range map[string]bool{"10.0.0.5": true, "10.0.0.9": true, "10.0.0.4": false, "10.0.0.10": false, "::a00:5": false} {
		if got := r.Contains(netip.MustParseAddr(a)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	if !r.InPrefix(netip.MustParsePrefix("10.0.0.0/28")) || r.InPrefix(netip.MustParsePrefix("10.0.0.8/29")) {
		t.Error("InPrefix wrong")
	}
	if got := PrefixRange(netip.MustParsePrefix("10.16.0.0/16")).String(); got != "10.16.0.0..10.16.255.255" {
		t.Errorf("PrefixRange = %s", got)
	}
	if got := PrefixRange(netip.MustParsePrefix("10.0.0.7/32")).String(); got != "10.0.0.7" {
		t.Errorf("PrefixRange /32 = %s", got)
	}
}

func TestSubnetValidate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		spec         SubnetSpec
		reason, frag string // reason "" = valid
	}{
		{name: "minimal v4", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16"}},
		{name: "full dual stack", spec: SubnetSpec{
			Vpc: "ovn-cluster", CIDRBlock: "10.16.0.0/16,fd00:10:16::/64", Gateway: "fd00:10:16::1,10.16.0.1",
			ExcludeIPs: []string{"10.16.0.2..10.16.0.10", "fd00:10:16::2"}, Protocol: ProtocolDual,
			Namespaces: []string{"default", "kube-system"}, NATOutgoing: true, GatewayType: GatewayCentralized,
			GatewayNodes: []string{"node-a", "node-b"}, Private: true, AllowSubnets: []string{"10.17.0.0/16"}}},
		{name: "v6 only with protocol", spec: SubnetSpec{CIDRBlock: "fd00::/120", Protocol: ProtocolIPv6, Gateway: "fd00::1"}},
		{name: "/30 is the smallest v4", spec: SubnetSpec{CIDRBlock: "10.0.0.0/30"}},

		{name: "empty cidr", spec: SubnetSpec{}, reason: ReasonInvalidCIDR, frag: "cidrBlock is empty"},
		{name: "garbage cidr", spec: SubnetSpec{CIDRBlock: "10.16.0.0"}, reason: ReasonInvalidCIDR, frag: "not a CIDR"},
		{name: "non-canonical cidr", spec: SubnetSpec{CIDRBlock: "10.16.0.1/16"}, reason: ReasonInvalidCIDR, frag: "canonical"},
		{name: "spaces", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16, fd00::/64"}, reason: ReasonInvalidCIDR, frag: "whitespace"},
		{name: "two v4", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16,10.17.0.0/16"}, reason: ReasonInvalidCIDR, frag: "two IPv4"},
		{name: "three cidrs", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64,10.17.0.0/16"}, reason: ReasonInvalidCIDR, frag: "at most one"},
		{name: "v4 too small", spec: SubnetSpec{CIDRBlock: "10.0.0.0/31"}, reason: ReasonInvalidCIDR, frag: "/30 or larger"},
		{name: "v6 too small", spec: SubnetSpec{CIDRBlock: "fd00::/127"}, reason: ReasonInvalidCIDR, frag: "/126 or larger"},

		{name: "protocol mismatch", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Protocol: ProtocolIPv6}, reason: ReasonProtocolMismatch, frag: "(IPv4)"},
		{name: "dual protocol single stack", spec: SubnetSpec{CIDRBlock: "fd00::/64", Protocol: ProtocolDual}, reason: ReasonProtocolMismatch, frag: "does not match"},
		{name: "unknown protocol", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Protocol: "IPv5"}, reason: ReasonProtocolMismatch, frag: "IPv5"},

		{name: "gateway outside", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.17.0.1"}, reason: ReasonInvalidGateway, frag: "outside cidrBlock"},
		{name: "gateway wrong family", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "fd00::1"}, reason: ReasonInvalidGateway, frag: "outside cidrBlock"},
		{name: "gateway malformed", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.16.0.x"}, reason: ReasonInvalidGateway, frag: "not an IP"},
		{name: "gateway network address", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.16.0.0"}, reason: ReasonInvalidGateway, frag: "network address"},
		{name: "gateway broadcast", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.16.255.255"}, reason: ReasonInvalidGateway, frag: "broadcast"},
		{name: "v6 last address is fine", spec: SubnetSpec{CIDRBlock: "fd00::/120", Gateway: "fd00::ff"}},
		{name: "dual stack one gateway", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64", Gateway: "10.16.0.1"}, reason: ReasonInvalidGateway, frag: "one gateway per CIDR"},
		{name: "dual stack two v4 gateways", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64", Gateway: "10.16.0.1,10.16.0.2"}, reason: ReasonInvalidGateway, frag: "two gateways"},

		{name: "exclude outside", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.17.0.1"}}, reason: ReasonInvalidExcludeIPs, frag: "outside cidrBlock"},
		{name: "exclude range straddles", spec: SubnetSpec{CIDRBlock: "10.16.0.0/24", ExcludeIPs: []string{"10.16.0.200..10.16.1.5"}}, reason: ReasonInvalidExcludeIPs, frag: "outside"},
		{name: "exclude reversed", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.16.0.9..10.16.0.1"}}, reason: ReasonInvalidExcludeIPs, frag: "reversed"},
		{name: "exclude malformed", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.16.0.0/24"}}, reason: ReasonInvalidExcludeIPs, frag: "excludeIps[0]"},

		{name: "centralized without nodes", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", GatewayType: GatewayCentralized}, reason: ReasonInvalidGatewayNodes, frag: "required when gatewayType is centralized"},
		{name: "bad gateway type", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", GatewayType: "everywhere"}, reason: ReasonInvalidGatewayNodes, frag: "everywhere"},
		{name: "duplicate gateway node", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", GatewayType: GatewayCentralized, GatewayNodes: []string{"a", "a"}}, reason: ReasonInvalidGatewayNodes, frag: "listed twice"},
		{name: "bad gateway node", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", GatewayNodes: []string{"Node_A"}}, reason: ReasonInvalidGatewayNodes, frag: "not a node name"},
		{name: "bad allowSubnet", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Private: true, AllowSubnets: []string{"10.17.0.1/16"}}, reason: ReasonInvalidAllowSubnets, frag: "canonical"},
		{name: "bad namespace", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", Namespaces: []string{"Default"}}, reason: ReasonInvalidNamespaces, frag: "namespaces[0]"},
		{name: "attachment network", spec: SubnetSpec{CIDRBlock: "10.20.0.0/24", Provider: "net/a"}},
		{name: "provider without namespace", spec: SubnetSpec{CIDRBlock: "10.20.0.0/24", Provider: "a"}, reason: ReasonInvalidProvider, frag: "namespace/name"},
		{name: "provider malformed", spec: SubnetSpec{CIDRBlock: "10.20.0.0/24", Provider: "Net/a_b"}, reason: ReasonInvalidProvider, frag: "namespace/name"},
		{name: "provider and default", spec: SubnetSpec{CIDRBlock: "10.20.0.0/24", Provider: "net/a", Default: true}, reason: ReasonInvalidProvider, frag: "spec.default"},
		{name: "provider and namespaces", spec: SubnetSpec{CIDRBlock: "10.20.0.0/24", Provider: "net/a", Namespaces: []string{"x"}}, reason: ReasonInvalidProvider, frag: "binds no namespace"},

		{name: "acls", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ACLs: []SubnetACL{
			{Direction: "to-lport", Priority: 100, Match: "ip4.src == 10.17.0.0/16 && tcp.dst == 8080", Action: "drop"},
			{Direction: "from-lport", Priority: 0, Match: "ip6 && udp.dst == 53", Action: "allow-related"}}}},
		{name: "acl match OVN refuses", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ACLs: []SubnetACL{
			{Direction: "to-lport", Priority: 1, Match: "tcp.dst == 8080", Action: "drop"},
			{Direction: "to-lport", Priority: 1, Match: "ip4.src == 10.17.0.1/16", Action: "drop"}}},
			reason: ReasonInvalidACL, frag: "spec.acls[1].match"},
		{name: "acl unknown field", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ACLs: []SubnetACL{
			{Direction: "to-lport", Priority: 1, Match: "tcp.port == 80", Action: "drop"}}}, reason: ReasonInvalidACL, frag: `unknown field "tcp.port"`},
		{name: "acl action", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ACLs: []SubnetACL{
			{Direction: "to-lport", Priority: 1, Match: "tcp", Action: "deny"}}}, reason: ReasonInvalidACL, frag: "spec.acls[0].action"},
		{name: "acl priority", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16", ACLs: []SubnetACL{
			{Direction: "to-lport", Priority: 1000, Match: "tcp", Action: "drop"}}}, reason: ReasonInvalidACL, frag: "outside 0..999"},

		{name: "external gateway", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24,fd00:28:100::/64", Gateway: "172.28.100.1,fd00:28:100::1", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.100.254", "fd00:28:100::fe"}, Nodes: []string{"n1", "n2"}}}},
		{name: "external gateway on an overlay subnet", spec: SubnetSpec{CIDRBlock: "10.16.0.0/16",
			ExternalGateway: &ExternalGateway{Addresses: []string{"10.16.0.254"}, Nodes: []string{"n1"}}}, reason: ReasonInvalidExternalGateway, frag: "only an underlay Subnet"},
		{name: "external gateway outside", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.101.1"}, Nodes: []string{"n1"}}}, reason: ReasonInvalidExternalGateway, frag: "outside cidrBlock"},
		{name: "external gateway is the physical router", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.100.1"}, Nodes: []string{"n1"}}}, reason: ReasonInvalidExternalGateway, frag: "physical router"},
		{name: "external gateway two of a family", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.100.253", "172.28.100.254"}, Nodes: []string{"n1"}}}, reason: ReasonInvalidExternalGateway, frag: "one per family"},
		{name: "external gateway without nodes", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.100.254"}}}, reason: ReasonInvalidExternalGateway, frag: "at least one node"},
		{name: "external gateway nodes by label", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.100.254"},
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kovn.io/external-gateway": "true"}}}}},
		{name: "external gateway bad node selector", spec: SubnetSpec{CIDRBlock: "172.28.100.0/24", Vlan: "v100",
			ExternalGateway: &ExternalGateway{Addresses: []string{"172.28.100.254"},
				NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "gw", Operator: "Sometimes"}}}}},
			reason: ReasonInvalidExternalGateway, frag: "spec.externalGateway.nodeSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.spec.Validate(), tc.reason, tc.frag) })
	}
}

func TestSubnetValidateReportsAll(t *testing.T) {
	s := SubnetSpec{CIDRBlock: "10.16.0.0/16", Gateway: "10.17.0.1", ExcludeIPs: []string{"bad"}, GatewayType: GatewayCentralized}
	err := s.Validate()
	var list ValidationErrors
	if !errors.As(err, &list) || len(list) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
	var first *ValidationError
	if !errors.As(err, &first) || first.Field != "spec.gateway" {
		t.Fatalf("errors.As first = %+v", first)
	}
}

func TestSubnetDerived(t *testing.T) {
	for _, tc := range []struct {
		spec  SubnetSpec
		proto Protocol
		gws   string
	}{
		{SubnetSpec{CIDRBlock: "10.16.0.0/16"}, ProtocolIPv4, "10.16.0.1"},
		{SubnetSpec{CIDRBlock: "fd00::/64"}, ProtocolIPv6, "fd00::1"},
		{SubnetSpec{CIDRBlock: "10.16.0.0/16,fd00::/64", Gateway: "fd00::fe"}, ProtocolDual, "10.16.0.1,fd00::fe"},
		{SubnetSpec{CIDRBlock: "fd00::/64,10.16.0.0/16", Gateway: "10.16.0.254,fd00::fe"}, ProtocolDual, "fd00::fe,10.16.0.254"},
	} {
		p, err := tc.spec.DerivedProtocol()
		if err != nil || p != tc.proto {
			t.Errorf("%s: protocol %s, %v; want %s", tc.spec.CIDRBlock, p, err, tc.proto)
		}
		gws, err := tc.spec.EffectiveGateways()
		var got []string
		for _, g := range gws {
			got = append(got, g.String())
		}
		if err != nil || strings.Join(got, ",") != tc.gws {
			t.Errorf("%s: gateways %v, %v; want %s", tc.spec.CIDRBlock, got, err, tc.gws)
		}
	}
	if _, err := (&SubnetSpec{CIDRBlock: "x"}).DerivedProtocol(); err == nil {
		t.Error("DerivedProtocol of a bad CIDR succeeded")
	}
}

func TestSubnetDefaults(t *testing.T) {
	s := &Subnet{}
	s.Name = "net1"
	if s.VpcName() != DefaultVpcName || s.LogicalSwitchName() != "net1" || s.Spec.EffectiveGatewayType() != GatewayDistributed {
		t.Errorf("defaults: vpc=%s ls=%s gw=%s", s.VpcName(), s.LogicalSwitchName(), s.Spec.EffectiveGatewayType())
	}
	s.Spec = SubnetSpec{Vpc: "v1", LogicalSwitch: "ls1", GatewayType: GatewayCentralized}
	if s.VpcName() != "v1" || s.LogicalSwitchName() != "ls1" || s.Spec.EffectiveGatewayType() != GatewayCentralized {
		t.Errorf("explicit: vpc=%s ls=%s gw=%s", s.VpcName(), s.LogicalSwitchName(), s.Spec.EffectiveGatewayType())
	}
}

func TestOverlap(t *testing.T) {
	sub := func(name, vpc, cidr string) *Subnet {
		s := &Subnet{Spec: SubnetSpec{Vpc: vpc, CIDRBlock: cidr}}
		s.Name = name
		return s
	}
	for _, tc := range []struct {
		name string
		a, b *Subnet
		frag string // "" = no conflict
	}{
		{"disjoint", sub("a", "", "10.16.0.0/16"), sub("b", "", "10.17.0.0/16"), ""},
		{"contained", sub("a", "", "10.16.0.0/16"), sub("b", "", "10.16.5.0/24"), "CIDR 10.16.0.0/16 overlaps 10.16.5.0/24 of subnet b in VPC ovn-cluster"},
		{"equal, default vpc spelled out", sub("a", "", "10.16.0.0/16"), sub("b", "ovn-cluster", "10.16.0.0/16"), "overlaps"},
		{"other vpc may overlap", sub("a", "", "10.16.0.0/16"), sub("b", "tenant", "10.16.0.0/16"), ""},
		{"dual stack v6 part", sub("a", "", "10.16.0.0/16,fd00::/64"), sub("b", "", "10.17.0.0/16,fd00::/48"), "fd00::/64 overlaps fd00::/48"},
		{"different families", sub("a", "", "10.16.0.0/16"), sub("b", "", "fd00::/64"), ""},
		{"same object", sub("a", "", "10.16.0.0/16"), sub("a", "", "10.16.0.0/16"), ""},
		{"invalid ignored", sub("a", "", "10.16.0.0/16"), sub("b", "", "10.16.0.0"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOverlap(tc.a, tc.b)
			if tc.frag == "" {
				wantErr(t, err, "", "")
			} else {
				wantErr(t, err, ReasonOverlap, tc.frag)
			}
		})
	}
}

func TestReasonOf(t *testing.T) {
	if ReasonOf(nil) != ReasonValid || ReasonOf(errors.New("x")) != ReasonValidationFailed {
		t.Error("ReasonOf nil/foreign")
	}
	var empty ValidationErrors
	if empty.err() != nil {
		t.Error("empty ValidationErrors must be a nil error")
	}
}
