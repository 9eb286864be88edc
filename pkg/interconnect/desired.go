package interconnect

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

// OwnerInterConnect owns the cluster's transit router and switch ports and the policies that
// let cross-cluster traffic be routed (not rerouted out through a node).
const OwnerInterConnect = "InterConnect"

// DefaultTransitSwitch is the transit switch every cluster of the set joins.
const DefaultTransitSwitch = "kovn-ts"

// MaxTransitSwitches bounds ECMP: an AZ in ECMP mode spreads over one transit switch per
// gateway (kovn-ts, kovn-ts1, ...), at most this many; further gateways are standbys only.
const MaxTransitSwitches = 8

// TransitSwitchName is transit switch i of the set.
func TransitSwitchName(i int) string {
	if i == 0 {
		return DefaultTransitSwitch
	}
	return DefaultTransitSwitch + strconv.Itoa(i)
}

// transitSwitchIndex is the i of a transit switch kovn makes; ok is false for any other name.
func transitSwitchIndex(name string) (int, bool) {
	if name == DefaultTransitSwitch {
		return 0, true
	}
	rest, ok := strings.CutPrefix(name, DefaultTransitSwitch)
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 1 || i >= MaxTransitSwitches || TransitSwitchName(i) != name {
		return 0, false
	}
	return i, true
}

// Transit networks of the default transit switch: each AZ's router port on it takes one
// address of each. IPv4 is link-local (never advertised by OVN-IC); the IPv6 range is kept out
// of route exchange by the deny list. Transit switch i uses 169.254.(100+i).0/24 and
// fd00:a9fe:64::i:0/112, with the AZ's same host number on each.
var (
	TransitCIDR4 = netip.MustParsePrefix("169.254.100.0/24")
	TransitCIDR6 = netip.MustParsePrefix("fd00:a9fe:64::/112")
)

// Gateway priorities: the first gateway gets the highest.
const topGatewayPriority = 100

// Input is everything the interconnect's desired state depends on, resolved by the reconciler.
type Input struct {
	AZ     string
	Router string // the default VPC's router
	// TransitSwitches are the set's transit switches, the default first: the AZ joins each
	// (an AZ in ECMP mode spreads over them, and its peers must reach it through every one).
	TransitSwitches []string
	// ECMP: the gateways take the transit switches in turn (switch i prefers gateway i), so
	// traffic spreads over them; else every transit port prefers the first gateway.
	ECMP bool
	// TransitIndex is this AZ's host number on the transit networks (1..254), unique in the set.
	TransitIndex int
	// Families of the cluster: the transit port gets an address of each.
	IPv4, IPv6 bool
	Gateways   []string // chassis, most preferred first
	// Held are gateways held at the lowest priority after a failure (see GatewayHold): every
	// transit port ranks them after the others.
	Held []string
	// LocalCIDRs are the default VPC's subnets (the join subnet excluded).
	LocalCIDRs []netip.Prefix
	// AdvertiseCIDRs, when set, limit what is advertised; RefuseCIDRs are never exchanged.
	AdvertiseCIDRs, RefuseCIDRs []netip.Prefix
	JoinCIDRs                   []netip.Prefix
	NodeIPs                     []netip.Addr
	// Remote are the prefixes other AZs advertise, by AZ.
	Remote map[string][]netip.Prefix
	// Joined are the times the AZs joined the set (this one included): in a conflict, the
	// later one withdraws.
	Joined map[string]time.Time
	// WithdrawnBy are the subnets other AZs withdrew for a conflict (no longer advertised,
	// so known only from what they declare), by AZ.
	WithdrawnBy map[string][]netip.Prefix
	// Declared are the subnets each other AZ declared its own in IC-NB: only routes inside
	// them are learned from it (see declaredRoutes). An AZ missing here declared nothing.
	Declared map[string][]netip.Prefix
	BFD      BFD
	// SwitchPortKeys are the tunnel keys ovn-ic gave the AZ's transit switch ports, by port
	// name (see PeerTunnelKeyID).
	SwitchPortKeys map[string]string
	// Foreign are the foreign AZs this cluster peers with (ForeignAZ), by name.
	Foreign []ForeignIn
}

// PeerTunnelKeyID, on a transit router port, is the tunnel key ovn-ic gave its peer switch
// port. Northd first keys a new switch port itself, then re-keys it with ovn-ic's key; the
// gateway's ovn-controller (23.03) compiles the peer's key into the router port's patch flow
// and, when only the peer's Port_Binding changes, re-adds that flow without removing the old
// one (the old one stays), so replies left with the first key and the peers dropped them (a
// joining cluster unreachable for 30-60 s, until a full recompute). Carrying the key on the
// router port (OVN copies its external_ids to its Port_Binding) changes the router port's
// binding too; and the gateway nodes get the keys (annotation.ICTransitKeys), which makes
// their ovn-controller rebuild all its physical flows (see node.ChassisIdentity).
const PeerTunnelKeyID = "kovn.io/peer-tunnel-key"

// BFD are the gateway failure detection timers, in ms.
type BFD struct{ MinRx, MinTx, Mult int }

// Desired is what the interconnect programs into the local northbound database.
type Desired struct {
	// Shard: the transit router port (a gateway port on Gateways), its switch port on the
	// transit switch, and an allow policy per learnable remote prefix.
	Shard topology.Shard
	// Options are the NB_Global options kovn owns (ovn-ic and BFD settings).
	Options map[string]string
	// Learned are the remote prefixes the cluster routes to, by AZ; Conflicts the ones it
	// refuses because they overlap a local subnet.
	Learned   map[string][]netip.Prefix
	Conflicts []Conflict
	// Withdraw are the local subnets this cluster withdraws for conflicts (it joined later);
	// the reconciler declares them in IC-NB so the older AZ can name the conflict too.
	Withdraw []netip.Prefix
	// Unenforced are IPv6 deny entries OVN-IC cannot be given (see ovnDenyOption): kovn does
	// not route to them, but ovn-ic may still advertise and learn them.
	Unenforced []netip.Prefix
	// Declare are the local subnets this AZ advertises, which it declares its own in IC-NB
	// (the only routes its peers learn from it).
	Declare []netip.Prefix
	// Refused are remote routes their AZ may not claim (declaredRoutes): never routed to.
	Refused []RefusedRoute
	// Foreign are the foreign AZs' shards and reports, in Input.Foreign's order.
	Foreign []ForeignDesired
}

// RefusedRoute is a route an AZ advertises but may not claim.
type RefusedRoute struct {
	AZ     string
	Prefix netip.Prefix
	Why    string
}

func (r RefusedRoute) String() string { return fmt.Sprintf("%s from %s (%s)", r.Prefix, r.AZ, r.Why) }

// Conflict is a remote prefix overlapping one of this cluster's subnets.
type Conflict struct {
	AZ     string
	Remote netip.Prefix
	Local  netip.Prefix
	// Withdrawn: this cluster joined after AZ and withdraws Local; else AZ withdraws Remote.
	Withdrawn bool
}

func (c Conflict) String() string {
	if c.Withdrawn {
		return fmt.Sprintf("local %s overlaps %s of AZ %s, which joined first: %s withdrawn here", c.Local, c.Remote, c.AZ, c.Local)
	}
	return fmt.Sprintf("%s of AZ %s overlaps local %s: AZ %s joined later and withdraws it", c.Remote, c.AZ, c.Local, c.AZ)
}

// joinedBefore reports whether AZ a joined the set before AZ b (by the join times the AZs
// recorded in IC-NB; an AZ with no record counts as joining now; ties go to the smaller name).
func joinedBefore(joined map[string]time.Time, a, b string) bool {
	ta, oka := joined[a]
	tb, okb := joined[b]
	switch {
	case oka && !okb:
		return true
	case !oka && okb:
		return false
	case oka && okb && !ta.Equal(tb):
		return ta.Before(tb)
	}
	return a < b
}

// RouterPortName is the AZ's router port on the transit switch; SwitchPortName its peer, the
// port OVN-IC publishes to the other AZs.
func RouterPortName(az, ts string) string { return az + "-" + ts }
func SwitchPortName(az, ts string) string { return ts + "-" + az }

// TransitAddrs are the AZ's port addresses on transit switch ts for host number idx.
func TransitAddrs(ts, idx int, v4, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	if v4 {
		b := TransitCIDR4.Addr().As4()
		b[2] += byte(ts)
		b[3] = byte(idx)
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(b), TransitCIDR4.Bits()))
	}
	if v6 {
		b := TransitCIDR6.Addr().As16()
		b[13] = byte(ts)
		b[15] = byte(idx)
		out = append(out, netip.PrefixFrom(netip.AddrFrom16(b), TransitCIDR6.Bits()))
	}
	return out
}

// transitPorts are the AZ's router port on each transit switch and its peer switch port, with
// the gateways in the order that transit switch prefers them.
func transitPorts(in Input) ([]topology.RouterPort, []topology.SwitchPort) {
	var rps []topology.RouterPort
	var sps []topology.SwitchPort
	for _, ts := range in.TransitSwitches {
		i, _ := transitSwitchIndex(ts)
		lrp, lsp := RouterPortName(in.AZ, ts), SwitchPortName(in.AZ, ts)
		var nets []string
		for _, p := range TransitAddrs(i, in.TransitIndex, in.IPv4, in.IPv6) {
			nets = append(nets, p.String())
		}
		rp := topology.RouterPort{Router: in.Router, Name: lrp, MAC: topology.RouterMAC(lrp), Networks: nets}
		if key := in.SwitchPortKeys[lsp]; key != "" {
			rp.ExternalIDs = map[string]string{PeerTunnelKeyID: key}
		}
		for j, gw := range portOrder(in, i) {
			rp.GatewayChassis = append(rp.GatewayChassis, topology.GatewayChassis{Chassis: gw, Priority: topGatewayPriority - j})
		}
		rps = append(rps, rp)
		sps = append(sps, topology.SwitchPort{Switch: ts, Name: lsp, Type: "router", Addresses: []string{"router"},
			Options: map[string]string{"router-port": lrp}})
	}
	return rps, sps
}

// portOrder is the gateways in the order transit switch i prefers them: in ECMP mode switch
// i prefers gateway i and the others follow in turn, else every switch has the gateways' own
// order; held gateways come last either way (in that order among themselves).
func portOrder(in Input, i int) []string {
	order := slices.Clone(in.Gateways)
	if in.ECMP && len(order) > 0 {
		k := i % len(order)
		order = append(order[k:], order[:k]...)
	}
	slices.SortStableFunc(order, func(a, b string) int {
		ha, hb := slices.Contains(in.Held, a), slices.Contains(in.Held, b)
		switch {
		case ha && !hb:
			return 1
		case hb && !ha:
			return -1
		}
		return 0
	})
	return order
}

// lostGateways are the gateways OVN found dead: a transit port that prev saw bound to one of
// them is now bound (now) to a gateway it ranks lower in the order the port was programmed
// with (orders, by transit switch index). A port moving up the order is a failback or a
// planned change, not a loss; nor is a port taken by a held gateway (one back from a failure
// can claim a port for a moment on its stale view of the priorities before it catches up).
// Ports missing from either side (just created, renamed, not bound) say nothing.
func lostGateways(orders [][]string, ports []string, prev, now map[string]string, held []string) []string {
	var lost []string
	for i, port := range ports {
		was, is := prev[port], now[port]
		if was == "" || is == "" || was == is || i >= len(orders) || slices.Contains(held, is) {
			continue
		}
		wasRank, isRank := slices.Index(orders[i], was), slices.Index(orders[i], is)
		if wasRank >= 0 && isRank > wasRank && !slices.Contains(lost, was) {
			lost = append(lost, was)
		}
	}
	slices.Sort(lost)
	return lost
}

// For computes the interconnect's desired state. It is pure: the reconciler lists, this decides.
func For(in Input) Desired {
	if len(in.TransitSwitches) == 0 {
		in.TransitSwitches = []string{DefaultTransitSwitch}
	}
	rps, sps := transitPorts(in)
	d := Desired{Shard: topology.Shard{OwnerType: OwnerInterConnect, Owner: Name, RouterPorts: rps, SwitchPorts: sps}}
	deny := denyList(in)
	base := slices.Clone(deny)
	for _, f := range in.Foreign {
		fd := forForeign(in, f, base)
		d.Foreign = append(d.Foreign, fd)
		deny = append(deny, fd.Deny...)
	}
	if len(in.Foreign) > 0 && in.IPv6 {
		deny = append(deny, ForeignLinkCIDR6) // a connected network of the Vpc routers
	}
	deny = sortedPrefixes(deny)
	remote := in
	remote.Remote, d.Refused = declaredRoutes(in)
	deny = append(deny, captureDeny(d.Refused, remote.Remote, in.LocalCIDRs)...)
	d.Learned, d.Conflicts = learnable(remote, deny)
	for i, c := range d.Conflicts {
		// The AZ that joined the set later withdraws its overlapping subnet, so every other
		// cluster keeps exactly one route for the prefix (the older AZ's).
		if joinedBefore(in.Joined, c.AZ, in.AZ) && !slices.Contains(in.WithdrawnBy[c.AZ], c.Remote) {
			d.Conflicts[i].Withdrawn = true
			deny = append(deny, c.Local)
			d.Withdraw = append(d.Withdraw, c.Local)
		}
	}
	d.Withdraw = sortedPrefixes(d.Withdraw)
	deny = sortedPrefixes(deny)
	for _, c := range in.LocalCIDRs {
		if !coveredBy(c, deny) {
			d.Declare = append(d.Declare, c)
		}
	}
	d.Declare = sortedPrefixes(d.Declare)
	option, unenforced := ovnDenyOption(deny, in)
	d.Unenforced = unenforced
	for i := range d.Foreign {
		// A refused IPv6 prefix the blacklist cannot carry is learned after all (onto the
		// peering router, which nothing routes to): reported as such.
		fd := &d.Foreign[i]
		fd.Deny = slices.DeleteFunc(fd.Deny, func(p netip.Prefix) bool {
			if slices.Contains(unenforced, p) {
				fd.IPv6Unblocked = append(fd.IPv6Unblocked, p)
				return true
			}
			return false
		})
	}
	d.Options = map[string]string{
		"ic-route-adv": "true", "ic-route-learn": "true", "ic-route-blacklist": strings.Join(prefixStrings(option), ","),
		"bfd-min-rx": strconv.Itoa(in.BFD.MinRx), "bfd-min-tx": strconv.Itoa(in.BFD.MinTx), "bfd-mult": strconv.Itoa(in.BFD.Mult),
	}
	var learned []netip.Prefix
	for _, ps := range d.Learned {
		learned = append(learned, ps...)
	}
	for _, p := range sortedPrefixes(learned) {
		fam := "ip4"
		if p.Addr().Is6() {
			fam = "ip6"
		}
		d.Shard.Policies = append(d.Shard.Policies, topology.Policy{Router: in.Router, Priority: topology.PriorityAllowCluster,
			Action: "allow", Match: fmt.Sprintf("%s.dst == %s", fam, p)})
	}
	return d
}

// declaredRoutes splits the other AZs' routes into those they may claim and the refused: an
// AZ's route is learned only inside the subnets it declared, never as a default route, and
// never overlapping what an AZ that joined the set earlier declared (a prefix inside another
// AZ's subnet would take its traffic by the longest match; one covering it would take the
// traffic to its unused addresses). So an AZ that advertises 0.0.0.0/1, or a subnet of
// another cluster, captures nothing. Overlaps with this cluster's own subnets are Conflicts
// (learnable), not refusals.
func declaredRoutes(in Input) (map[string][]netip.Prefix, []RefusedRoute) {
	accepted := map[string][]netip.Prefix{}
	var refused []RefusedRoute
	for az, prefixes := range in.Remote {
		declared, ok := in.Declared[az]
		for _, p := range prefixes {
			why := ""
			switch {
			case !ok:
				why = "its AZ declared no subnets"
			case p.Bits() == 0:
				why = "a default route"
			case !coveredBy(p, declared):
				why = fmt.Sprintf("outside its declared subnets %v", declared)
			default:
				why = overlapsEarlier(in, az, p)
			}
			if why != "" {
				refused = append(refused, RefusedRoute{AZ: az, Prefix: p, Why: why})
				continue
			}
			accepted[az] = append(accepted[az], p)
		}
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].String() < refused[j].String() })
	return accepted, refused
}

// overlapsEarlier names the subnet of an AZ that joined before az (other than this cluster's,
// whose overlaps are Conflicts) that p overlaps, or is empty.
func overlapsEarlier(in Input, az string, p netip.Prefix) string {
	others := slices.Sorted(maps.Keys(in.Declared))
	for _, o := range others {
		if o == az || o == in.AZ || !joinedBefore(in.Joined, o, az) {
			continue
		}
		if q, ok := overlapping(p, in.Declared[o]); ok {
			return fmt.Sprintf("overlaps %s's declared %s, which joined earlier", o, q)
		}
	}
	return ""
}

// captureDeny are the refused routes ovn-ic must not learn: those inside a route this cluster
// learns or inside one of its own subnets, where the longer refused route would win (ovn-ic
// installs a learned route even inside a connected network). A refused route covering others
// (or nothing) is merely not routed to: denying it would deny the routes inside it too.
func captureDeny(refused []RefusedRoute, accepted map[string][]netip.Prefix, local []netip.Prefix) []netip.Prefix {
	all, out := slices.Clone(local), []netip.Prefix(nil)
	for _, ps := range accepted {
		all = append(all, ps...)
	}
	for _, r := range refused {
		if coveredBy(r.Prefix, all) {
			out = append(out, r.Prefix)
		}
	}
	return out
}

// denyList is what OVN-IC must neither advertise nor learn: the join subnet, node addresses,
// the transit networks (the default one always), the refused CIDRs, and (with AdvertiseCIDRs) local subnets outside them.
func denyList(in Input) []netip.Prefix {
	deny := slices.Clone(in.JoinCIDRs)
	for _, ts := range in.TransitSwitches {
		i, _ := transitSwitchIndex(ts)
		deny = append(deny, TransitAddrs(i, 0, true, true)...)
	}
	for _, ip := range in.NodeIPs {
		deny = append(deny, netip.PrefixFrom(ip, ip.BitLen()))
	}
	deny = append(deny, in.RefuseCIDRs...)
	if len(in.AdvertiseCIDRs) > 0 {
		for _, c := range in.LocalCIDRs {
			if !coveredBy(c, in.AdvertiseCIDRs) {
				deny = append(deny, c)
			}
		}
	}
	return sortedPrefixes(deny)
}

// ovnDenyOption is the part of the deny list NB_Global's ic-route-blacklist can carry. OVN
// 23.03 ignores the address of an IPv6 entry (prefix_is_black_listed in ovn-ic.c: a
// `continue` that leaves the inner loop, not the outer one), so an IPv6 entry /n denies every
// IPv6 route of length n or longer. An IPv6 entry not longer than every advertised local IPv6
// subnet would withdraw those subnets too; it is left out and returned as unenforced. The
// entries kovn itself needs (join, transit, node addresses) are /112 or longer, so they fit
// while IPv6 subnets are shorter than /112.
func ovnDenyOption(deny []netip.Prefix, in Input) (option, unenforced []netip.Prefix) {
	longest := 0 // the longest advertised local IPv6 subnet's prefix length
	for _, c := range in.LocalCIDRs {
		if c.Addr().Is6() && !coveredBy(c, deny) && c.Bits() > longest {
			longest = c.Bits()
		}
	}
	for _, p := range deny {
		if p.Addr().Is6() && p.Bits() <= longest {
			unenforced = append(unenforced, p)
			continue
		}
		option = append(option, p)
	}
	return option, unenforced
}

// learnable returns, per AZ, the remote prefixes the cluster routes to, and the conflicts: remote
// prefixes overlapping a local subnet, advertised or declared withdrawn by their AZ. A remote
// prefix that strictly contains the local subnet is still routed to (the local, longer prefix
// wins for its own addresses); one equal to or inside it is not (it would take local traffic).
func learnable(in Input, deny []netip.Prefix) (map[string][]netip.Prefix, []Conflict) {
	out := map[string][]netip.Prefix{}
	var conflicts []Conflict
	for az, prefixes := range in.Remote {
		for _, p := range prefixes {
			if coveredBy(p, deny) {
				continue
			}
			local, ok := overlapping(p, in.LocalCIDRs)
			if ok {
				conflicts = append(conflicts, Conflict{AZ: az, Remote: p, Local: local})
			}
			if !ok || p.Bits() < local.Bits() {
				out[az] = append(out[az], p)
			}
		}
		out[az] = sortedPrefixes(out[az])
	}
	for az, prefixes := range in.WithdrawnBy {
		for _, p := range prefixes {
			if local, ok := overlapping(p, in.LocalCIDRs); ok && az != in.AZ {
				conflicts = append(conflicts, Conflict{AZ: az, Remote: p, Local: local})
			}
		}
	}
	sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].String() < conflicts[j].String() })
	return out, slices.CompactFunc(conflicts, func(a, b Conflict) bool { return a == b })
}

func coveredBy(p netip.Prefix, by []netip.Prefix) bool {
	for _, b := range by {
		if b.Addr().Is4() == p.Addr().Is4() && b.Bits() <= p.Bits() && b.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func overlapping(p netip.Prefix, with []netip.Prefix) (netip.Prefix, bool) {
	for _, w := range with {
		if w.Overlaps(p) {
			return w, true
		}
	}
	return netip.Prefix{}, false
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
