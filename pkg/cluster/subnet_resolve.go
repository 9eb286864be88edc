package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/api/v1alpha1/match"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// resolve validates sn on its own, against its VPC and against every other Subnet, and turns
// it into the topology's input. Of two conflicting subnets the older keeps what it has: its
// CIDR, its namespaces, its default flag.
func (r *SubnetReconciler) resolve(ctx context.Context, sn *kovnv1.Subnet, all []kovnv1.Subnet) (topology.SubnetIn, error) {
	if err := sn.Spec.Validate(); err != nil {
		return topology.SubnetIn{}, err
	}
	for i := range all {
		o := &all[i]
		if o.Name == sn.Name || !older(o, sn) || !o.DeletionTimestamp.IsZero() && r.gone(o) {
			continue
		}
		if err := checkConflicts(sn, o); err != nil {
			return topology.SubnetIn{}, err
		}
	}
	if err := r.checkVpc(ctx, sn); err != nil {
		return topology.SubnetIn{}, err
	}
	cidrs, _ := sn.Spec.CIDRs()
	gws, err := sn.Spec.EffectiveGateways()
	if err != nil {
		return topology.SubnetIn{}, err
	}
	in := topology.SubnetIn{Name: sn.Name, Vpc: sn.VpcName(), Switch: sn.LogicalSwitchName(), CIDRs: cidrs, Gateways: gws,
		ExcludeIPs: sn.Spec.ExcludeIPs, GatewayNodes: sn.Spec.GatewayNodes,
		Centralized: sn.Spec.EffectiveGatewayType() == kovnv1.GatewayCentralized, Private: sn.Spec.Private,
		PodBandwidth: subnetPodBandwidth(sn.Spec.PodBandwidth), Provider: sn.Spec.Provider}
	if in.Underlay, err = r.underlay(ctx, sn); err != nil {
		return topology.SubnetIn{}, err
	}
	if eg := sn.Spec.ExternalGateway; eg != nil && in.Underlay != nil {
		nodes, err := r.externalGatewayNodes(ctx, eg)
		if err != nil {
			return topology.SubnetIn{}, err
		}
		if len(nodes) > 0 { // none labelled yet: no port until one is
			in.Underlay.External = &topology.ExternalGatewayIn{Addrs: sn.Spec.ExternalGatewayAddrs(), Nodes: nodes,
				GatewayMAC: strings.ToLower(eg.GatewayMAC)}
		}
	}
	if in.ACLs, err = r.acls(ctx, sn); err != nil {
		return topology.SubnetIn{}, err
	}
	if sn.Spec.Private {
		for _, c := range sn.Spec.AllowSubnets {
			p, _ := kovnv1.ParsePrefix(c) // validated above
			in.AllowSubnets = append(in.AllowSubnets, p)
		}
	}
	return in, nil
}

// externalGatewayNodes are the nodes that may host an external gateway port: its list as
// written (a node may join later), or the nodes its selector matches, by name.
func (r *SubnetReconciler) externalGatewayNodes(ctx context.Context, eg *kovnv1.ExternalGateway) ([]string, error) {
	if len(eg.Nodes) > 0 || eg.NodeSelector == nil {
		return eg.Nodes, nil
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, err
	}
	return ChooseNodes(nil, eg.NodeSelector, nodes.Items)
}

// acls turns spec.acls (each match already parsed by Validate) into the topology's input,
// refusing a match that names an address set or port group NB does not have: OVN would
// drop that ACL.
func (r *SubnetReconciler) acls(ctx context.Context, sn *kovnv1.Subnet) ([]topology.SubnetACLIn, error) {
	var out []topology.SubnetACLIn
	for i, a := range sn.Spec.ACLs {
		refs, err := match.Check(a.Match)
		if err != nil {
			return nil, err // Validate refused it already
		}
		for _, name := range refs.AddressSets {
			if r.NB != nil && !nbHas(ctx, r.NB, &nb.AddressSet{Name: name}) {
				return nil, &kovnv1.ValidationError{Field: fmt.Sprintf("spec.acls[%d].match", i), Reason: kovnv1.ReasonInvalidACL,
					Message: fmt.Sprintf("match %q: address set $%s does not exist in OVN", a.Match, name)}
			}
		}
		for _, name := range refs.PortGroups {
			if r.NB != nil && !nbHas(ctx, r.NB, &nb.PortGroup{Name: name}) {
				return nil, &kovnv1.ValidationError{Field: fmt.Sprintf("spec.acls[%d].match", i), Reason: kovnv1.ReasonInvalidACL,
					Message: fmt.Sprintf("match %q: port group @%s does not exist in OVN", a.Match, name)}
			}
		}
		in := topology.SubnetACLIn{Direction: a.Direction, Priority: a.Priority, Match: a.Match, Action: a.Action}
		if a.Log {
			in.LogSeverity = cmp.Or(a.Severity, "info")
		}
		out = append(out, in)
	}
	return out, nil
}

// nbHas reports whether NB holds the row m (looked up by its index, the name).
func nbHas(ctx context.Context, c libovsdb.Client, m model.Model) bool {
	return c.Get(ctx, m) == nil
}

// gone reports whether a subnet being deleted no longer holds anything (its CIDR is free).
func (r *SubnetReconciler) gone(sn *kovnv1.Subnet) bool {
	return r.State != nil && len(r.State.IPAM.Owners(sn.Name)) == 0
}

// checkConflicts checks sn against an older subnet o: overlapping CIDRs in one VPC, a
// namespace bound to both, two default subnets.
func checkConflicts(sn, o *kovnv1.Subnet) error {
	if err := kovnv1.CheckOverlap(sn, o); err != nil {
		return err
	}
	for _, ns := range sn.Spec.Namespaces {
		if slices.Contains(o.Spec.Namespaces, ns) {
			return &kovnv1.ValidationError{Field: "spec.namespaces", Reason: kovnv1.ReasonNamespaceConflict,
				Message: fmt.Sprintf("namespace %s is already bound to subnet %s", ns, o.Name)}
		}
	}
	if sn.Spec.Default && o.Spec.Default {
		return &kovnv1.ValidationError{Field: "spec.default", Reason: kovnv1.ReasonMultipleDefaults,
			Message: fmt.Sprintf("subnet %s is already the default subnet", o.Name)}
	}
	return nil
}

// checkVpc checks that the subnet's VPC exists and lets the subnet's namespaces attach.
func (r *SubnetReconciler) checkVpc(ctx context.Context, sn *kovnv1.Subnet) error {
	var vpc kovnv1.Vpc
	err := r.Get(ctx, types.NamespacedName{Name: sn.VpcName()}, &vpc)
	if apierrors.IsNotFound(err) {
		return &kovnv1.ValidationError{Field: "spec.vpc", Reason: kovnv1.ReasonVpcNotFound,
			Message: fmt.Sprintf("VPC %q does not exist", sn.VpcName())}
	}
	if err != nil {
		return err
	}
	if len(vpc.Spec.Namespaces) == 0 {
		return nil
	}
	for _, ns := range sn.Spec.Namespaces {
		if !slices.Contains(vpc.Spec.Namespaces, ns) {
			return &kovnv1.ValidationError{Field: "spec.namespaces", Reason: kovnv1.ReasonNamespaceNotAllowed,
				Message: fmt.Sprintf("namespace %s may not use VPC %s (its spec.namespaces: %v)", ns, vpc.Name, vpc.Spec.Namespaces)}
		}
	}
	return nil
}

func older(a, b *kovnv1.Subnet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func mustExcludes(sn *kovnv1.Subnet) []ipam.Range {
	rs, _ := sn.Spec.ExcludeRanges() // validated before
	for _, a := range sn.Spec.ExternalGatewayAddrs() {
		rs = append(rs, kovnv1.IPRange{First: a, Last: a}) // the router's own, never a pod's
	}
	return ipamRanges(rs)
}

// ipamRanges converts the API's ranges to the IPAM's (which imports no kovn package).
func ipamRanges(rs []kovnv1.IPRange) []ipam.Range {
	if rs == nil {
		return nil
	}
	out := make([]ipam.Range, len(rs))
	for i, r := range rs {
		out[i] = ipam.Range(r)
	}
	return out
}

// underlay resolves an underlay subnet's Vlan to its physical network; nil for overlay subnets.
// The ProviderNetwork need not exist yet: the localnet port names it, and nodes join it as
// their kovn-daemon sets the network up (the Vlan's condition says whether it exists).
func (r *SubnetReconciler) underlay(ctx context.Context, sn *kovnv1.Subnet) (*topology.UnderlayIn, error) {
	if sn.Spec.Vlan == "" {
		return nil, nil
	}
	var v kovnv1.Vlan
	if err := r.Get(ctx, types.NamespacedName{Name: sn.Spec.Vlan}, &v); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &kovnv1.ValidationError{Field: "spec.vlan", Reason: kovnv1.ReasonVlanNotFound,
				Message: fmt.Sprintf("vlan %q does not exist", sn.Spec.Vlan)}
		}
		return nil, err
	}
	return &topology.UnderlayIn{Provider: v.Spec.Provider, VlanID: int(v.Spec.ID)}, nil
}
