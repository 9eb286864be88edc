package endpoints

import (
	"net/netip"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func slice(eps ...discoveryv1.Endpoint) []discoveryv1.EndpointSlice {
	return []discoveryv1.EndpointSlice{{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}}}
}

func ep(addr, node string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To(node),
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
}

func addrs(eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Addr.String())
	}
	return out
}

// Ready endpoints first; with none ready the serving terminating ones; never the not-serving
// ones; unknown conditions read as ready and serving.
func TestUsable(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	all := func(e Endpoint) bool { return true }
	cases := []struct {
		name      string
		eps       []discoveryv1.Endpoint
		keep      func(Endpoint) bool
		want      []string
		wantReady bool
	}{
		{"ready win over terminating", []discoveryv1.Endpoint{ep("10.0.0.1", "n1", yes, yes, no), ep("10.0.0.2", "n1", no, yes, yes)},
			all, []string{"10.0.0.1"}, true},
		{"terminating when none is ready", []discoveryv1.Endpoint{ep("10.0.0.2", "n1", no, yes, yes), ep("10.0.0.3", "n1", no, no, yes)},
			all, []string{"10.0.0.2"}, false},
		{"not serving never", []discoveryv1.Endpoint{ep("10.0.0.3", "n1", no, no, yes), ep("10.0.0.4", "n1", no, no, no)},
			all, nil, false},
		{"unknown conditions are ready", []discoveryv1.Endpoint{ep("10.0.0.5", "n1", nil, nil, nil)}, all, []string{"10.0.0.5"}, true},
		{"keep filters before the fallback", []discoveryv1.Endpoint{ep("10.0.0.1", "n1", yes, yes, no), ep("10.0.0.2", "n2", no, yes, yes)},
			func(e Endpoint) bool { return e.Node == "n2" }, []string{"10.0.0.2"}, false},
	}
	for _, c := range cases {
		got, ready := Usable(FromSlices(slice(c.eps...)), c.keep)
		if g := addrs(got); len(g) != len(c.want) || (len(g) > 0 && g[0] != c.want[0]) || ready != c.wantReady {
			t.Errorf("%s: got %v ready=%v, want %v ready=%v", c.name, g, ready, c.want, c.wantReady)
		}
	}
}

// Each endpoint keeps its own slice's port numbers; FQDN slices and bad addresses are left out.
func TestFromSlices(t *testing.T) {
	sl := slice(ep("10.0.0.1", "n1", nil, nil, nil), discoveryv1.Endpoint{Addresses: []string{"not-an-ip"}})
	sl = append(sl, discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"example.com"}}}})
	got := FromSlices(sl)
	if len(got) != 1 || got[0].Addr != netip.MustParseAddr("10.0.0.1") || got[0].Ports["http"] != 8080 || got[0].Node != "n1" {
		t.Fatalf("FromSlices = %+v", got)
	}
}
