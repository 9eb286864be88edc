package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// OwnerForeignAZ owns a ForeignAZ's peering router, its link to the Vpc's router, its
// transit port and the Vpc router's policies towards it.
const OwnerForeignAZ = "ForeignAZ"

// OwnerEgressIP owns an EgressIP's NAT rows and policies.
const OwnerEgressIP = "EgressIP"

// EgressIPIn is an EgressIP with the pods it selects.
type EgressIPIn struct {
	Name        string
	Router      string // the default VPC's router
	GatewayPort string // the external subnet's router port (RouterPortName)
	// Addresses are the egress addresses, at most one per family.
	Addresses []netip.Addr
	// PodIPs are the selected pods' addresses.
	PodIPs []netip.Addr
	// Nexthops are the external subnet's gateways (its physical router), one per family.
	Nexthops []netip.Addr
}

// ForEgressIP is an EgressIP's shard, per family with an egress address, a gateway and
// selected pods: an snat NAT per pod address on the external subnet's gateway port (not
// distributed: the translation happens on the node hosting that port, which holds the egress
// address and answers for it, and OVN moves both together), and one policy sending those pods'
// traffic to the external network's router through that port. Traffic to the cluster's
// subnets, to nodes and to other clusters' pods matches higher priorities first and is
// neither rerouted nor translated; a FloatingIP's policy (higher too) wins for its pod.
func ForEgressIP(in EgressIPIn) Shard {
	sh := Shard{OwnerType: OwnerEgressIP, Owner: in.Name}
	for _, ext := range in.Addresses {
		hop, ok := SameFamily(in.Nexthops, ext)
		if !ok {
			continue
		}
		var srcs []string
		for _, ip := range sortedAddrs(in.PodIPs) {
			if ip.Is4() != ext.Is4() {
				continue
			}
			sh.NATs = append(sh.NATs, NAT{Router: in.Router, Type: "snat", ExternalIP: ext, LogicalIP: ip, GatewayPort: in.GatewayPort})
			srcs = append(srcs, ip.String())
		}
		if len(srcs) == 0 {
			continue
		}
		sh.Policies = append(sh.Policies, Policy{Router: in.Router, Priority: PriorityEgressIP, Action: "reroute",
			Nexthops: []string{hop.String()}, Match: fmt.Sprintf("%s.src == {%s}", family(ext), strings.Join(srcs, ", "))})
	}
	sortPolicies(sh.Policies)
	return sh
}

func sortedAddrs(as []netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}
