package netattach

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// TestParseSelectionsSpecExamples: the NPWG specification's own annotation examples read as the
// spec says (namespace from the pod, interface net<position> unless named).
func TestParseSelectionsSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []Selection
	}{
		{"macvlan-conf-1", []Selection{{Name: "macvlan-conf-1", Namespace: "pods", Interface: "net1"}}},
		{"macvlan-conf-1@eth1, macvlan-conf-2", []Selection{
			{Name: "macvlan-conf-1", Namespace: "pods", Interface: "eth1"},
			{Name: "macvlan-conf-2", Namespace: "pods", Interface: "net2"}}},
		{"testns1/macvlan-conf-1@eth1, testns2/macvlan-conf-2", []Selection{
			{Name: "macvlan-conf-1", Namespace: "testns1", Interface: "eth1"},
			{Name: "macvlan-conf-2", Namespace: "testns2", Interface: "net2"}}},
		{`[
  { "name" : "macvlan-conf-1", "interface": "eth1" },
  { "name" : "macvlan-conf-2", "namespace": "testns2", "ips": [ "10.2.2.42/24" ], "mac": "CA:FE:C0:FF:EE:00" }
]`, []Selection{
			{Name: "macvlan-conf-1", Namespace: "pods", Interface: "eth1"},
			{Name: "macvlan-conf-2", Namespace: "testns2", Interface: "net2", IPs: []string{"10.2.2.42/24"}, MAC: "ca:fe:c0:ff:ee:00"}}},
		{"", nil},
	} {
		got, err := ParseSelections(tc.value, "pods")
		if err != nil {
			t.Errorf("%q: %v", tc.value, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.value, got, tc.want)
		}
	}
}

// TestParseSelectionsRefused: every malformed request is refused whole, with the reason.
func TestParseSelectionsRefused(t *testing.T) {
	for value, want := range map[string]string{
		"net-a,":                      "empty network name",
		"/net-a":                      "empty namespace",
		"net-a@":                      "empty interface name",
		"Net_A":                       "network name",
		"bad_ns/net-a":                "namespace",
		"net-a@eth0":                  "reserved",
		"net-a@averyveryverylongname": "1 to 15 characters",
		"net-a@x,net-b@x":             "asked for twice",
		`[{"name": "net-a"`:           "not a JSON list",
		`{"name": "net-a"}`:           "network name", // not a list: read as the short form
		`[{"name": "net-a", "ips": ["10.0.0.1", "10.0.0.2"]}]`:                     "more than one address of the same family",
		`[{"name": "net-a", "ips": ["ten"]}]`:                                      "neither an address",
		`[{"name": "net-a", "mac": "01:00:5e:00:00:01"}]`:                          "multicast MAC",
		`[{"name": "net-a", "mac": "0a:12:34:56:78:9a"}]`:                          "range kovn keeps for router ports",
		`[{"name": "net-a", "default-route": ["gw"]}]`:                             "not an address",
		"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,aa,ab,ac,ad,ae,af,ag": "at most 32",
	} {
		_, err := ParseSelections(value, "pods")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", value, err, want)
		}
	}
}

func TestSelectionAddrs(t *testing.T) {
	s := Selection{Name: "n", Namespace: "ns", IPs: []string{"10.2.2.42/24", "fd00::42"}}
	got, err := s.Addrs()
	if err != nil || len(got) != 2 || got[0].String() != "10.2.2.42" || got[1].String() != "fd00::42" {
		t.Fatalf("Addrs: %v %v", got, err)
	}
}

func TestParseNAD(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         Attachment
		err          string
	}{
		{"kovn subnet", `{"cniVersion": "1.0.0", "type": "kovn", "provider": "ns/a"}`,
			Attachment{Key: "ns/a", Kind: KindKovn, Plugin: "kovn", KovnIPAM: true, CNIVersion: "1.0.0"}, ""},
		{"kovn-cni in a list", `{"cniVersion": "1.0.0", "name": "a", "plugins": [{"type": "kovn-cni"}]}`,
			Attachment{Key: "ns/a", Kind: KindKovn, Plugin: "kovn-cni", KovnIPAM: true, CNIVersion: "1.0.0"}, ""},
		{"macvlan with kovn ipam", `{"cniVersion": "1.0.0", "type": "macvlan", "master": "eth1", "ipam": {"type": "kovn"}}`,
			Attachment{Key: "ns/a", Kind: KindDelegate, Plugin: "macvlan", KovnIPAM: true, CNIVersion: "1.0.0"}, ""},
		{"bridge with its own ipam", `{"cniVersion": "1.0.0", "type": "bridge", "ipam": {"type": "static"}}`,
			Attachment{Key: "ns/a", Kind: KindDelegate, Plugin: "bridge", CNIVersion: "1.0.0"}, ""},
		{"empty", ``, Attachment{}, "spec.config is empty"},
		{"not JSON", `{"type": `, Attachment{}, "not JSON"},
		{"a chain", `{"plugins": [{"type": "macvlan"}, {"type": "tuning"}]}`, Attachment{}, "exactly one"},
		{"no type", `{"cniVersion": "1.0.0"}`, Attachment{}, "no type"},
		{"not allowed", `{"type": "sriov"}`, Attachment{}, `"sriov" is not allowed`},
		{"another provider", `{"type": "kovn", "provider": "other/b"}`, Attachment{}, "names another definition"},
		{"kovn with ipam", `{"type": "kovn", "ipam": {"type": "host-local"}}`, Attachment{}, "remove ipam"},
		// The node's interfaces only as the admin allows (eth1 and cni0 here).
		{"host-device on eth0", `{"type": "host-device", "device": "eth0"}`, Attachment{}, `node's interface "eth0", which the admin has not allowed`},
		{"host-device by PCI address", `{"type": "host-device", "pciBusID": "0000:00:1f.6"}`, Attachment{}, "by name only"},
		{"macvlan on eth0", `{"type": "macvlan", "master": "eth0"}`, Attachment{}, `node's interface "eth0"`},
		{"macvlan on the default interface", `{"type": "macvlan"}`, Attachment{}, "names no interface"},
		{"ipvlan on ovn0", `{"type": "ipvlan", "master": "ovn0"}`, Attachment{}, `node's interface "ovn0"`},
		{"bridge named like the node's", `{"type": "bridge", "bridge": "br-phys"}`, Attachment{}, `node's interface "br-phys"`},
	} {
		got, err := ParseNAD("ns/a", tc.config, testDelegates)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got.Config = nil
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// testDelegates allows the default plugin types on the node interfaces eth1 and cni0.
var testDelegates = AllowingHostInterfaces("eth1", "cni0")

func TestStatusRoundTrip(t *testing.T) {
	in := []NetworkStatus{
		{Name: "kovn", Interface: "eth0", IPs: []string{"10.16.0.5", "fd00:10:16::5"}, MAC: "0a:58:0a:10:00:05", Default: true},
		{Name: "ns/a", Interface: "net1", IPs: []string{"10.20.0.7"}, MAC: "0a:58:0a:14:00:07"},
	}
	s, err := FormatStatus(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseStatus(s)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %+v %v", out, err)
	}
}

func TestCheckNamespace(t *testing.T) {
	own := Selection{Name: "a", Namespace: "pods"}
	other := Selection{Name: "a", Namespace: "nets"}
	if err := CheckNamespace(own, "pods", nil); err != nil {
		t.Errorf("own namespace: %v", err)
	}
	if err := CheckNamespace(other, "pods", map[string]string{SharedNetworksAnnotation: "true"}); err != nil {
		t.Errorf("shared namespace: %v", err)
	}
	for _, ann := range []map[string]string{nil, {}, {SharedNetworksAnnotation: "yes"}} {
		if err := CheckNamespace(other, "pods", ann); err == nil || !strings.Contains(err.Error(), "does not share") {
			t.Errorf("namespace annotated %v: %v, want refused", ann, err)
		}
	}
}

// TestDelegateConfig: a macvlan with kovn IPAM is called with static IPAM holding exactly
// kovn's addresses, named after its network; a delegate with its own IPAM keeps it.
func TestDelegateConfig(t *testing.T) {
	a, err := ParseNAD("ns/mv", `{"type": "macvlan", "master": "eth1", "mode": "bridge", "ipam": {"type": "kovn"}}`, testDelegates)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DelegateConfig(a, []netip.Prefix{netip.MustParsePrefix("172.28.50.5/24"), netip.MustParsePrefix("fd00:28:50::5/64")})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cniVersion":"1.0.0","ipam":{"addresses":[{"address":"172.28.50.5/24"},{"address":"fd00:28:50::5/64"}],"type":"static"},"master":"eth1","mode":"bridge","name":"ns-mv","type":"macvlan"}`
	if string(b) != want {
		t.Errorf("config\n got %s\nwant %s", b, want)
	}
	if _, err := DelegateConfig(a, nil); err == nil {
		t.Error("kovn IPAM without addresses: no error")
	}
	own, _ := ParseNAD("ns/br", `{"cniVersion": "0.4.0", "name": "br", "type": "bridge", "ipam": {"type": "static", "addresses": [{"address": "10.9.0.2/24"}]}}`, testDelegates)
	b, err = DelegateConfig(own, nil)
	if err != nil || !strings.Contains(string(b), `"10.9.0.2/24"`) || !strings.Contains(string(b), `"cniVersion":"0.4.0"`) {
		t.Errorf("own IPAM: %s %v", b, err)
	}
}
