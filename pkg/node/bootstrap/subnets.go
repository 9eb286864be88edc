package bootstrap

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/api/meta"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// subnetCIDRs are the node's share of the subnets: what to route via ovn0, what to masquerade
// and which destinations are the cluster's own (never masqueraded).
type subnetCIDRs struct {
	routed, nat, all []netip.Prefix
}

// desiredCIDRs picks every subnet whose spec the controller validated, the join subnet excepted
// from routing. It keys on Validated, not Ready, on purpose: a Subnet being deleted while pods
// still hold addresses in it stays Validated (the controller's finalizer holds it, Ready=False
// InUse), and its pods still need the node route for kubelet probes and node->pod traffic. The
// route goes when the object is gone or Validated turns False. Ready means "programmed in OVN"
// and flips for reasons that must not cut running pods off their node.
//
// Only subnets of the join subnet's VPC are the node's business: ovn0 sits on that VPC's
// router, other VPCs are isolated from it and may reuse the same CIDRs.
func desiredCIDRs(subnets []kovnv1.Subnet, joinSubnet string) subnetCIDRs {
	var out subnetCIDRs
	for _, s := range NodeVPCSubnets(subnets, joinSubnet) {
		cidrs, err := s.Spec.CIDRs()
		if err != nil {
			continue
		}
		out.all = append(out.all, cidrs...)
		if s.Name == joinSubnet {
			continue
		}
		out.routed = append(out.routed, cidrs...)
		if s.Spec.NATOutgoing {
			out.nat = append(out.nat, cidrs...)
		}
	}
	return out
}

// NodeVPCSubnets are the validated subnets of the join subnet's VPC (the default VPC until the
// join subnet is known), the join subnet included: the ones the node reaches through ovn0.
// Underlay (vlan) subnets are not among them: the node reaches those over the physical network
// like any outside host, and an overlay pod's connection to one is masqueraded to the node's
// address, since the physical router has no route back to the overlay.
func NodeVPCSubnets(subnets []kovnv1.Subnet, joinSubnet string) []*kovnv1.Subnet {
	vpc := kovnv1.DefaultVpcName
	for i := range subnets {
		if subnets[i].Name == joinSubnet {
			vpc = subnets[i].VpcName()
		}
	}
	var out []*kovnv1.Subnet
	for i := range subnets {
		s := &subnets[i]
		if s.VpcName() == vpc && s.Spec.Vlan == "" && meta.IsStatusConditionTrue(s.Status.Conditions, kovnv1.ConditionValidated) {
			out = append(out, s)
		}
	}
	return out
}
