package interconnect

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

// A foreign AZ (ForeignAZ) is an OVN availability zone kovn does not run. OVN 23.03's
// route exchange has no per-switch filter: ovn-ic advertises, on every transit switch a router
// has a port on, all of that router's connected networks and static routes, and the only
// filter (ic-route-blacklist) is global to the AZ. So the Vpc's router never joins the
// foreign transit switch itself. A peering router does: its static routes are exactly the
// agreed local prefixes (via a link to the Vpc's router), so exactly those are advertised
// there; ovn-ic learns the foreign AZ's routes onto it, and the Vpc's router routes to it only
// the learned prefixes inside AcceptCIDRs (reroute policies, which ovn-ic never advertises). Refused foreign prefixes also go in the AZ's
// blacklist, so ovn-ic does not learn them at all, where that is safe (see ForeignDesired).

// Link networks between a Vpc's router and a peering router: link i is 169.254.99.4i/30 and
// fd00:a9fe:63::4i/126, the Vpc's router taking .4i+1 and the peering router .4i+2.
var (
	ForeignLinkCIDR4 = netip.MustParsePrefix("169.254.99.0/24")
	ForeignLinkCIDR6 = netip.MustParsePrefix("fd00:a9fe:63::/112")
)

// MaxForeignLinks bounds ForeignAZ link indexes (1..MaxForeignLinks).
const MaxForeignLinks = 63

// ForeignIn is one ForeignAZ, resolved.
type ForeignIn struct {
	Name          string // the ForeignAZ object's
	AZ            string // the foreign AZ's name
	VpcRouter     string
	TransitSwitch string
	// TransitAddrs are kovn's port addresses on the transit switch, with the network's length.
	TransitAddrs []netip.Prefix
	LinkIndex    int
	// Advertise and Accept are the agreed prefixes (ForeignAZSpec).
	Advertise, Accept []netip.Prefix
	// VpcCIDRs are the Vpc's subnets: a foreign prefix overlapping one is refused.
	VpcCIDRs []netip.Prefix
	// Remote are the prefixes the foreign AZ advertises on the transit switch.
	Remote []netip.Prefix
}

// ForeignDesired is what For programs for one foreign AZ, and what it reports.
type ForeignDesired struct {
	Name  string
	Shard topology.Shard
	// Advertised are the prefixes the peering router advertises; NotAdvertised the agreed ones
	// the AZ's blacklist keeps from being advertised (it is global to the AZ).
	Advertised, NotAdvertised []netip.Prefix
	// Learned are the foreign prefixes routed to; Refused the others it advertises.
	Learned, Refused []netip.Prefix
	// Unadvertised are AcceptCIDRs with no advertised prefix inside.
	Unadvertised []netip.Prefix
	// Deny are the refused prefixes the blacklist can carry: none overlapping a local subnet
	// or a prefix the clusterset advertises (the blacklist would withdraw or refuse those
	// too). Unblocked are the others: ovn-ic learns them onto the peering router, but no
	// route of the Vpc's router leads there; IPv6Unblocked likewise, for refused IPv6
	// prefixes OVN 23.03's blacklist cannot carry (see ovnDenyOption).
	Deny, Unblocked, IPv6Unblocked []netip.Prefix
	// Overlapping are the refused prefixes inside the Vpc's subnets (the others are refused
	// for lying outside AcceptCIDRs).
	Overlapping []netip.Prefix
}

// Names of a foreign AZ's peering router and its link to the Vpc's router.
func ForeignRouterName(name string) string  { return "kovn-faz-" + name }
func foreignLinkSwitch(name string) string  { return ForeignRouterName(name) + "-link" }
func foreignVpcPort(name string) string     { return ForeignRouterName(name) + "-vpc" }
func foreignPeeringPort(name string) string { return ForeignRouterName(name) + "-peer" }
func foreignSwitchPort(lrp string) string   { return lrp + "-lsp" }

// ForeignLinkAddrs are link i's addresses, on the Vpc's router (vpc) and on the peering
// router (peer), of the families asked for.
func ForeignLinkAddrs(i int, v4, v6 bool) (vpc, peer []netip.Prefix) {
	if v4 {
		b := ForeignLinkCIDR4.Addr().As4()
		b[3] = byte(4*i + 1)
		vpc = append(vpc, netip.PrefixFrom(netip.AddrFrom4(b), 30))
		b[3]++
		peer = append(peer, netip.PrefixFrom(netip.AddrFrom4(b), 30))
	}
	if v6 {
		b := ForeignLinkCIDR6.Addr().As16()
		b[15] = byte(4*i + 1)
		vpc = append(vpc, netip.PrefixFrom(netip.AddrFrom16(b), 126))
		b[15]++
		peer = append(peer, netip.PrefixFrom(netip.AddrFrom16(b), 126))
	}
	return vpc, peer
}

// forForeign computes one foreign AZ's shard. in is the clusterset's input (local AZ,
// gateways, the clusterset's remote routes); deny the AZ's blacklist before any foreign AZ.
func forForeign(in Input, f ForeignIn, deny []netip.Prefix) ForeignDesired {
	d := ForeignDesired{Name: f.Name}
	peer := ForeignRouterName(f.Name)
	sh := topology.Shard{OwnerType: topology.OwnerForeignAZ, Owner: f.Name,
		Routers: []topology.Router{{Name: peer}}, Switches: []topology.Switch{{Name: foreignLinkSwitch(f.Name)}}}
	v4 := slices.ContainsFunc(f.TransitAddrs, func(p netip.Prefix) bool { return p.Addr().Is4() })
	v6 := slices.ContainsFunc(f.TransitAddrs, func(p netip.Prefix) bool { return p.Addr().Is6() })
	vpcLink, peerLink := ForeignLinkAddrs(f.LinkIndex, v4, v6)
	link := func(router, port string, nets []netip.Prefix) {
		sh.RouterPorts = append(sh.RouterPorts, topology.RouterPort{Router: router, Name: port, MAC: topology.RouterMAC(port),
			Networks: prefixStrings(nets)})
		sh.SwitchPorts = append(sh.SwitchPorts, topology.SwitchPort{Switch: foreignLinkSwitch(f.Name), Name: foreignSwitchPort(port),
			Type: "router", Addresses: []string{"router"}, Options: map[string]string{"router-port": port}})
	}
	link(f.VpcRouter, foreignVpcPort(f.Name), vpcLink)
	link(peer, foreignPeeringPort(f.Name), peerLink)

	lrp, lsp := RouterPortName(in.AZ, f.TransitSwitch), SwitchPortName(in.AZ, f.TransitSwitch)
	tp := topology.RouterPort{Router: peer, Name: lrp, MAC: topology.RouterMAC(lrp), Networks: prefixStrings(f.TransitAddrs)}
	if key := in.SwitchPortKeys[lsp]; key != "" {
		tp.ExternalIDs = map[string]string{PeerTunnelKeyID: key}
	}
	for j, gw := range portOrder(in, 0) {
		tp.GatewayChassis = append(tp.GatewayChassis, topology.GatewayChassis{Chassis: gw, Priority: topGatewayPriority - j})
	}
	sh.RouterPorts = append(sh.RouterPorts, tp)
	sh.SwitchPorts = append(sh.SwitchPorts, topology.SwitchPort{Switch: f.TransitSwitch, Name: lsp, Type: "router",
		Addresses: []string{"router"}, Options: map[string]string{"router-port": lrp}})

	// Advertised: a static route per agreed prefix on the peering router, towards the Vpc.
	for _, p := range sortedPrefixes(f.Advertise) {
		via, ok := topology.SameFamily(vpcLink, p.Addr())
		switch {
		case !ok || coveredBy(p, deny):
			d.NotAdvertised = append(d.NotAdvertised, p)
			continue
		}
		d.Advertised = append(d.Advertised, p)
		sh.Routes = append(sh.Routes, topology.StaticRoute{Router: peer, Prefix: p.String(), Nexthop: via.Addr().String()})
	}
	d.Learned, d.Refused = splitForeign(f)
	for _, p := range d.Learned {
		via, ok := topology.SameFamily(peerLink, p.Addr())
		if !ok {
			continue
		}
		// A policy, not a static route: ovn-ic would advertise a static route of the Vpc's
		// router to the clusterset on kovn-ts, leaking the foreign prefix to AZs the foreign
		// AZ never agreed to answer.
		sh.Policies = append(sh.Policies, topology.Policy{Router: f.VpcRouter, Priority: topology.PriorityForeignAZ,
			Action: "reroute", Match: fmt.Sprintf("%s.dst == %s", family(p), p), Nexthops: []string{via.Addr().String()}})
	}
	for _, a := range f.Accept {
		if !slices.ContainsFunc(d.Learned, func(p netip.Prefix) bool { return coveredBy(p, []netip.Prefix{a}) }) {
			d.Unadvertised = append(d.Unadvertised, a)
		}
	}
	d.Unadvertised = sortedPrefixes(d.Unadvertised)
	sortRefused(in, f, &d)
	d.Shard = sh
	return d
}

// sortRefused files each of d.Refused, in one pass: Overlapping when inside the Vpc's subnets
// (else it lies outside AcceptCIDRs), and Deny when the blacklist may carry it, Unblocked when
// it overlaps a local subnet or a prefix the clusterset advertises (the blacklist would
// withdraw or refuse those too).
func sortRefused(in Input, f ForeignIn, d *ForeignDesired) {
	var clusterset []netip.Prefix
	for _, ps := range in.Remote {
		clusterset = append(clusterset, ps...)
	}
	local := append(slices.Clone(in.LocalCIDRs), f.VpcCIDRs...)
	for _, p := range d.Refused {
		if _, inside := overlapping(p, f.VpcCIDRs); inside {
			d.Overlapping = append(d.Overlapping, p)
		}
		_, isLocal := overlapping(p, local)
		_, theirs := overlapping(p, clusterset)
		if isLocal || theirs {
			d.Unblocked = append(d.Unblocked, p)
		} else {
			d.Deny = append(d.Deny, p)
		}
	}
}

// splitForeign sorts the foreign AZ's prefixes into learned (inside an accepted CIDR and
// clear of the Vpc's subnets) and refused.
func splitForeign(f ForeignIn) (learned, refused []netip.Prefix) {
	for _, p := range sortedPrefixes(f.Remote) {
		if _, local := overlapping(p, f.VpcCIDRs); !local && coveredBy(p, f.Accept) {
			learned = append(learned, p)
		} else {
			refused = append(refused, p)
		}
	}
	return learned, refused
}

func family(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "ip4"
	}
	return "ip6"
}
