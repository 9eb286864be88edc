package topology

import (
	"fmt"
	"net/netip"
)

// OwnerFloatingIP owns a FloatingIP's NAT rows and policies.
const OwnerFloatingIP = "FloatingIP"

// FloatingIPIn is a bound FloatingIP: each external address with the pod address of its
// family, on the external subnet's router port.
type FloatingIPIn struct {
	Name        string
	Router      string // the default VPC's router
	GatewayPort string // the external subnet's router port (RouterPortName)
	Pairs       []FloatingPair
	// Nexthops are the external subnet's gateways (its physical router), one per family: the
	// pod's traffic leaves through them, translated.
	Nexthops []netip.Addr
	// PodPort, when set, distributes the translation to the pod's own node (it is on the
	// external network): there, not on the gateway node, OVN translates and answers for the
	// floating addresses, with FloatingIPMAC(Name).
	PodPort string
}

// FloatingIPMAC is the MAC a distributed floating IP answers with: stable per FloatingIP
// ("/" keeps it apart from every router port's, whose names have none).
func FloatingIPMAC(name string) string { return RouterMAC("fip/" + name) }

// FloatingPair is one family's translation.
type FloatingPair struct {
	External, Logical netip.Addr
}

// ForFloatingIP is a FloatingIP's shard: a dnat_and_snat NAT per family on the external
// subnet's gateway port (the external network reaches the pod on the floating address, the
// pod's connections leave with it as source), and a policy that sends the pod's traffic, other
// than to the cluster's subnets and nodes (higher priorities), to the external network's
// router through that port instead of out of its own node. A pair whose family the external
// subnet has no gateway for is left out.
func ForFloatingIP(in FloatingIPIn) Shard {
	sh := Shard{OwnerType: OwnerFloatingIP, Owner: in.Name}
	for _, p := range in.Pairs {
		hop, ok := SameFamily(in.Nexthops, p.Logical)
		if !ok || p.External.Is4() != p.Logical.Is4() {
			continue
		}
		nat := NAT{Router: in.Router, Type: "dnat_and_snat", ExternalIP: p.External, LogicalIP: p.Logical, GatewayPort: in.GatewayPort}
		if in.PodPort != "" {
			nat.LogicalPort, nat.ExternalMAC = in.PodPort, FloatingIPMAC(in.Name)
		}
		sh.NATs = append(sh.NATs, nat)
		sh.Policies = append(sh.Policies, Policy{Router: in.Router, Priority: PriorityFloatingIP, Action: "reroute",
			Nexthops: []string{hop.String()}, Match: fmt.Sprintf("%s.src == %s", family(p.Logical), p.Logical)})
	}
	sortPolicies(sh.Policies)
	return sh
}
