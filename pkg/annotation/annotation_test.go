package annotation

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// wantError fails unless err is nil exactly when fragment is "" and otherwise mentions fragment.
func wantError(t *testing.T, err error, fragment string) {
	t.Helper()
	switch {
	case fragment == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case fragment != "" && err == nil:
		t.Fatalf("no error, want one mentioning %q", fragment)
	case fragment != "" && !strings.Contains(err.Error(), fragment):
		t.Fatalf("error %q does not mention %q", err, fragment)
	}
}

func TestParseAddrs(t *testing.T) {
	tests := []struct {
		in      string
		want    []netip.Addr
		wantErr string
	}{
		{in: "10.16.0.5", want: addrs("10.16.0.5")},
		{in: "fd00::5", want: addrs("fd00::5")},
		{in: "10.16.0.5,fd00::5", want: addrs("10.16.0.5", "fd00::5")},
		{in: "fd00::5,10.16.0.5", want: addrs("fd00::5", "10.16.0.5")}, // order kept
		{in: " 10.16.0.5 , fd00::5 ,", want: addrs("10.16.0.5", "fd00::5")},
		{in: "::ffff:10.16.0.5", want: addrs("10.16.0.5")}, // IPv4-mapped is unmapped
		{in: "10.16.0.5,10.16.0.6", wantErr: "more than one address of the same family"},
		{in: "fd00::5,fd00::6", wantErr: "more than one address of the same family"},
		{in: "10.16.0.5,::ffff:10.16.0.6", wantErr: "more than one address of the same family"},
		{in: "10.16.0.5,garbage", wantErr: `"garbage" is not an IP address`},
		{in: "10.16.0.0/16", wantErr: "is not an IP address"},
		{in: "", wantErr: "no IP address"},
		{in: " , ", wantErr: "no IP address"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseAddrs(tc.in)
			wantError(t, err, tc.wantErr)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseAddrs(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		in      string
		want    []netip.Prefix
		wantErr string
	}{
		{in: "10.16.0.0/16", want: prefixes("10.16.0.0/16")},
		{in: "10.16.0.0/16,fd00::/64", want: prefixes("10.16.0.0/16", "fd00::/64")},
		{in: " 100.64.0.0/16 ,", want: prefixes("100.64.0.0/16")},
		{in: "10.16.0.0/16,bogus", wantErr: `"bogus" is not a CIDR`},
		{in: "10.16.0.1", wantErr: "is not a CIDR"},
		{in: "", wantErr: "no CIDR"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePrefixes(tc.in)
			wantError(t, err, tc.wantErr)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParsePrefixes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "0a:58:0a:10:00:05", want: "0a:58:0a:10:00:05"},
		{in: "0A:58:0A:10:00:FF", want: "0a:58:0a:10:00:ff"},
		{in: "0a-58-0a-10-00-05", want: "0a:58:0a:10:00:05"},
		{in: " 0a:58:0a:10:00:05 ", want: "0a:58:0a:10:00:05"},
		{in: "01:00:5e:00:00:01", wantErr: "multicast"},
		{in: "ff:ff:ff:ff:ff:ff", wantErr: "multicast"},
		{in: "0a:58:0a:10:00:05:00:01", wantErr: "is not a MAC address"}, // EUI-64
		{in: "0a:58:0a:10:00", wantErr: "is not a MAC address"},
		{in: "", wantErr: "is not a MAC address"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMAC(tc.in)
			wantError(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("ParseMAC(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestJoinAddrs(t *testing.T) {
	if got := JoinAddrs(addrs("10.16.0.5", "fd00::5")); got != "10.16.0.5,fd00::5" {
		t.Errorf("JoinAddrs = %q", got)
	}
	if got := JoinAddrs(prefixes("10.16.0.0/16")); got != "10.16.0.0/16" {
		t.Errorf("JoinAddrs = %q", got)
	}
}

func TestPodNetworkFrom(t *testing.T) {
	dual := map[string]string{
		Allocated: "true", IPAddress: "10.16.0.5,fd00:10:16::5", CIDR: "10.16.0.0/16,fd00:10:16::/64",
		Gateway: "10.16.0.1,fd00:10:16::1", MACAddress: "0A:58:0A:10:00:05", LogicalSwitch: "ovn-default",
		PortName: "a.default",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range dual {
			m[kk] = vv
		}
		if v == "<delete>" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		desc    string
		ann     map[string]string
		want    PodNetwork
		wantOK  bool
		wantErr string
	}{
		{desc: "dual stack", ann: dual, wantOK: true, want: PodNetwork{
			IPs: addrs("10.16.0.5", "fd00:10:16::5"), CIDRs: prefixes("10.16.0.0/16", "fd00:10:16::/64"),
			Gateways: addrs("10.16.0.1", "fd00:10:16::1"), MAC: "0a:58:0a:10:00:05", Switch: "ovn-default", PortName: "a.default"}},
		{desc: "no annotations", ann: nil},
		{desc: "requests only, not allocated", ann: map[string]string{IPAddress: "10.16.0.5"}},
		{desc: "allocated false", ann: with(Allocated, "false")},
		{desc: "allocated missing", ann: with(Allocated, "<delete>")},
		{desc: "fewer CIDRs than addresses", ann: with(CIDR, "10.16.0.0/16"), wantErr: "1 CIDRs"},
		{desc: "fewer gateways than addresses", ann: with(Gateway, "10.16.0.1"), wantErr: "1 gateways"},
		{desc: "bad address", ann: with(IPAddress, "x"), wantErr: IPAddress},
		{desc: "bad CIDR", ann: with(CIDR, "x"), wantErr: CIDR},
		{desc: "missing gateway", ann: with(Gateway, "<delete>"), wantErr: Gateway},
		{desc: "multicast MAC", ann: with(MACAddress, "01:00:5e:00:00:01"), wantErr: MACAddress},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok, err := PodNetworkFrom(tc.ann)
			wantError(t, err, tc.wantErr)
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if tc.wantOK && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PodNetworkFrom = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseACLLogging(t *testing.T) {
	for _, tc := range []struct {
		in, deny, allow string
		bad             bool
	}{
		{"", "", "", false},
		{`{"deny": "alert", "allow": "notice"}`, "alert", "notice", false},
		{`{"deny": "warning"}`, "warning", "", false},
		{`{"allow": "debug", "deny": ""}`, "", "debug", false},
		{`{"deny": "loud"}`, "", "", true},
		{`{"drop": "alert"}`, "", "", true},
		{`deny=alert`, "", "", true},
	} {
		deny, allow, err := ParseACLLogging(tc.in)
		if (err != nil) != tc.bad || deny != tc.deny || allow != tc.allow {
			t.Errorf("%q: %q %q %v", tc.in, deny, allow, err)
		}
	}
}
