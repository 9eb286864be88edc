package cni

import (
	"errors"
	"net"
	"net/netip"
	"reflect"
	"testing"
)

func dualStack() *PodNetwork {
	return &PodNetwork{
		IPs:      []netip.Prefix{netip.MustParsePrefix("10.16.0.5/16"), netip.MustParsePrefix("fd00:10:16::5/64")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.16.0.1"), netip.MustParseAddr("fd00:10:16::1")},
		MAC:      net.HardwareAddr{0x0a, 0x58, 0x0a, 0x10, 0x00, 0x05},
		PortName: "web-0.default",
	}
}

func TestPodNetworkValidate(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(n *PodNetwork)
		ok     bool
	}{
		{desc: "dual stack", mutate: func(*PodNetwork) {}, ok: true},
		{desc: "v4 only without gateway", mutate: func(n *PodNetwork) { n.IPs, n.Gateways = n.IPs[:1], nil }, ok: true},
		{desc: "extra route", mutate: func(n *PodNetwork) {
			n.Routes = []Route{{Dst: netip.MustParsePrefix("10.96.0.0/12"), Gateway: netip.MustParseAddr("10.16.0.1")}}
		}, ok: true},
		{desc: "no port name", mutate: func(n *PodNetwork) { n.PortName = "" }},
		{desc: "no MAC", mutate: func(n *PodNetwork) { n.MAC = nil }},
		{desc: "multicast MAC", mutate: func(n *PodNetwork) { n.MAC = net.HardwareAddr{1, 0, 0x5e, 0, 0, 1} }},
		{desc: "zero MAC", mutate: func(n *PodNetwork) { n.MAC = make(net.HardwareAddr, 6) }},
		{desc: "no IPs", mutate: func(n *PodNetwork) { n.IPs, n.Gateways = nil, nil }},
		{desc: "MTU too small", mutate: func(n *PodNetwork) { n.MTU = 500 }},
		{desc: "gateway outside subnet", mutate: func(n *PodNetwork) { n.Gateways[0] = netip.MustParseAddr("10.17.0.1") }},
		{desc: "two v4 gateways", mutate: func(n *PodNetwork) { n.Gateways[1] = netip.MustParseAddr("10.16.0.2") }},
		{desc: "route with wrong family gateway", mutate: func(n *PodNetwork) {
			n.Routes = []Route{{Dst: netip.MustParsePrefix("10.96.0.0/12"), Gateway: netip.MustParseAddr("fd00:10:16::1")}}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n := dualStack()
			tc.mutate(n)
			err := n.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate error = %v, want ErrInvalidConfig", err)
			}
		})
	}
	var nilNet *PodNetwork
	if err := nilNet.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil network: %v", err)
	}
}

func TestPodRoutes(t *testing.T) {
	n := dualStack()
	want := []Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.16.0.1")},
		{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("fd00:10:16::1")},
	}
	if got := n.podRoutes(); !reflect.DeepEqual(got, want) {
		t.Errorf("podRoutes = %v, want %v", got, want)
	}
	// A default route in Routes replaces the gateway's for its family only.
	own := Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.16.0.254")}
	n.Routes = []Route{own}
	want = []Route{want[1], own}
	if got := n.podRoutes(); !reflect.DeepEqual(got, want) {
		t.Errorf("podRoutes with own v4 default = %v, want %v", got, want)
	}
	// IPv6 only: the IPv6 default route and nothing of IPv4.
	n = dualStack()
	n.IPs, n.Gateways = n.IPs[1:], n.Gateways[1:]
	want = []Route{{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("fd00:10:16::1")}}
	if got := n.podRoutes(); !reflect.DeepEqual(got, want) {
		t.Errorf("IPv6-only podRoutes = %v, want %v", got, want)
	}
}

func TestPodMTU(t *testing.T) {
	n := dualStack()
	if got := n.mtu(0); got != DefaultMTU {
		t.Errorf("mtu(0) = %d, want %d", got, DefaultMTU)
	}
	if got := n.mtu(1450); got != 1450 {
		t.Errorf("mtu(1450) = %d", got)
	}
	n.MTU = 1300
	if got := n.mtu(1450); got != 1300 {
		t.Errorf("controller's MTU must win, got %d", got)
	}
}
