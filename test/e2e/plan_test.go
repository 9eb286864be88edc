package e2e

import (
	"net/netip"
	"strings"

	"github.com/kovn/kovn/test/rig"
)

// netPlan is what the pod-networking suite writes in its objects and expects back, in the
// rig's primary family (IPv4 on a dual-stack rig, IPv6 on an IPv6-only one), so the same suite
// runs on both.
type netPlan struct {
	v6       bool
	podCIDR  netip.Prefix // the default subnet's primary CIDR
	protocol string       // ovn-default's status.protocol
	gateways string       // ovn-default's status.gateway
	used     string       // the status field counting primary-family addresses
	static   string       // a static pod address
	pool     [2]string    // an IPPool's first and last address
	badIP    string       // a malformed address annotation
	overlap  string       // a CIDR inside the default subnet
	badGw    [2]string    // a CIDR and a gateway outside it
	central  string       // the centralized-gateway subnet
	vpc      string       // the custom VPC's subnet
	route    [2]string    // the custom VPC's static route: prefix, next hop
	forgedGw string       // what a forger claims as gateway
	mac      string       // a static MAC
}

func planFor(family string) netPlan {
	if family == rig.IPv6 {
		return netPlan{v6: true, podCIDR: rig.PodCIDR6(1), protocol: "IPv6", gateways: "fd00:10:16::1", used: "v6UsedIPs",
			static: "fd00:10:16::100:100", pool: [2]string{"fd00:10:16::200:10", "fd00:10:16::200:12"},
			badIP: "fd00:10:16::300:g1", overlap: "fd00:10:16::5:0/112", badGw: [2]string{"fd00:30:30::/64", "fd00:31::1"},
			central: "fd00:200::/64", vpc: "fd00:50::/64", route: [2]string{"2001:db8::/64", "fd00:50::fe"},
			forgedGw: "fd00:10:16::1", mac: "02:00:00:10:01:00"}
	}
	p := netPlan{podCIDR: rig.PodCIDR(1), protocol: "IPv4", gateways: "10.16.0.1", used: "v4UsedIPs",
		static: "10.16.100.100", pool: [2]string{"10.16.200.10", "10.16.200.12"},
		badIP: "10.16.300.1", overlap: "10.16.5.0/24", badGw: [2]string{"10.30.0.0/24", "10.31.0.1"},
		central: "10.200.0.0/24", vpc: "10.50.0.0/24", route: [2]string{"192.0.2.0/24", "10.50.0.254"},
		forgedGw: "10.16.0.1", mac: "02:00:00:10:01:00"}
	if family == rig.Dual {
		p.protocol, p.gateways = "Dual", "10.16.0.1,fd00:10:16::1"
	}
	return p
}

// nodeIP is node n of cluster 1 in the primary family; ext the external host.
func (p netPlan) nodeIP(n int) string {
	if p.v6 {
		return rig.NodeIP6(1, n).String()
	}
	return rig.NodeIP(1, n).String()
}

func (p netPlan) ext() string {
	if p.v6 {
		return rig.ExternalHostIP6().String()
	}
	return rig.ExternalHostIP().String()
}

// inPrefix reports whether addr (text) is inside the CIDR (text).
func inPrefix(addr, cidr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	p, err := netip.ParsePrefix(cidr)
	return err == nil && p.Contains(a)
}

// ipRange renders an IPPool range.
func (p netPlan) ipRange() string { return strings.Join(p.pool[:], "..") }
