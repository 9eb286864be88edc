package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/hostnet"
)

// Names of the node steps, as they appear in events and logs.
const (
	StepChassisIdentity   = "chassis-identity"
	StepChassisAnnotation = "chassis-annotation"
	StepOvn0              = "ovn0"
	StepRoutes            = "routes"
	StepSNAT              = "snat"
	StepForwarding        = "forwarding"
	StepCNIConfig         = "cni-config"
)

// nodeOps are the side effects the steps make; tests replace them to make one fail.
type nodeOps struct {
	chassis    func(ctx context.Context, id ChassisIdentity) error
	ovn0       func(ctx context.Context, jc JoinConfig) (netlink.Link, error)
	routes     func(link netlink.Link, cidrs []netip.Prefix, gateways []netip.Addr) error
	nat        func(natCIDRs, clusterCIDRs []netip.Prefix) error
	forwarding func() error
	cniConfig  func() error
}

func (r *Reconciler) realOps() *nodeOps {
	return &nodeOps{
		chassis: func(ctx context.Context, id ChassisIdentity) error { return EnsureChassisIdentity(ctx, r.OVS, id) },
		ovn0: func(ctx context.Context, jc JoinConfig) (netlink.Link, error) {
			return EnsureOvn0(ctx, r.OVS, r.Cfg.Bridge, jc)
		},
		routes:     SyncRoutes,
		nat:        r.syncNAT,
		forwarding: hostnet.EnableForwarding,
		cniConfig:  func() error { return WriteCNIConfig(r.Cfg.CNIConfDir, r.Cfg.CNISocket, r.Cfg.MTU) },
	}
}

// syncNAT is r.SyncNAT, an error while it is not set.
func (r *Reconciler) syncNAT(natCIDRs, clusterCIDRs []netip.Prefix) error {
	if r.SyncNAT == nil {
		return errors.New("no SNAT writer: Reconciler.SyncNAT is not set")
	}
	return r.SyncNAT(natCIDRs, clusterCIDRs)
}

// pass is what one reconcile of the node shares between its steps.
type pass struct {
	r    *Reconciler
	node *corev1.Node
	link netlink.Link // set by the ovn0 step
	cidr *subnetCIDRs // listed once per pass, on first use
}

// steps lists the node's plumbing; a step comes after those it needs. The CNI config — whose presence turns
// the node Ready for pods — needs only what a pod cannot work without: the chassis identity
// (else ovn-controller never binds the pod's port), ovn0 and the routes (else kubelet cannot
// reach the pod: probes fail and the pod restarts in a loop). SNAT, forwarding and the chassis
// annotation serve egress and the controller; their failure is reported, not a reason to keep
// pods off the node.
func (p *pass) steps() []Step {
	return []Step{
		{Name: StepChassisIdentity, Run: p.chassisIdentity},
		{Name: StepChassisAnnotation, Run: p.chassisAnnotation},
		{Name: StepSNAT, Run: p.snat},
		{Name: StepForwarding, Run: func(context.Context) error { return p.r.ops.forwarding() }},
		// ovn0 may wait up to 30 s for vswitchd to create the port: after the quick steps.
		{Name: StepOvn0, Needs: []string{StepChassisIdentity}, Run: p.ovn0},
		{Name: StepRoutes, Needs: []string{StepOvn0}, Run: p.routes},
		{Name: StepCNIConfig, Needs: []string{StepChassisIdentity, StepOvn0, StepRoutes},
			Run: func(context.Context) error { return p.r.ops.cniConfig() }},
	}
}

// chassisIdentity registers the node as an OVN chassis named after it, tunnelling from its
// InternalIP.
func (p *pass) chassisIdentity(ctx context.Context) error {
	var encap string
	for _, a := range p.node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && encap == "" {
			encap = a.Address
		}
	}
	if encap == "" {
		return fmt.Errorf("node %s has no InternalIP to use as tunnel endpoint", p.node.Name)
	}
	id := ChassisIdentity{SystemID: p.node.Name, OVNRemote: p.r.Cfg.OVNRemote, EncapIP: encap, Netdev: p.r.Cfg.Netdev,
		Interconn: p.node.Annotations[annotation.ICGateway] == "true", TransitKeys: p.node.Annotations[annotation.ICTransitKeys]}
	if !id.Interconn {
		id.TransitKeys = ""
	}
	if err := p.r.ops.chassis(ctx, id); err != nil {
		return fmt.Errorf("chassis identity in Open_vSwitch: %w", err)
	}
	return nil
}

// chassisAnnotation records the chassis name on the Node.
func (p *pass) chassisAnnotation(ctx context.Context) error {
	node := p.node
	if node.Annotations[annotation.Chassis] == node.Name {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[annotation.Chassis] = node.Name
	return p.r.Patch(ctx, node, patch)
}

func (p *pass) ovn0(ctx context.Context) error {
	jc, ok, err := joinConfig(p.node, p.r.Cfg.MTU)
	if err != nil {
		return err
	}
	if !ok {
		return Pending("kovn-controller has not assigned node %s its join address yet", p.node.Name)
	}
	p.link, err = p.r.ops.ovn0(ctx, jc)
	return err
}

func (p *pass) routes(ctx context.Context) error {
	cidrs, err := p.subnets(ctx)
	if err != nil {
		return err
	}
	jc, _, err := joinConfig(p.node, p.r.Cfg.MTU) // ovn0 succeeded, so it parses
	if err != nil {
		return err
	}
	return p.r.ops.routes(p.link, append(slices.Clone(cidrs.routed), p.r.Cfg.ServiceCIDRs...), jc.Gateways)
}

func (p *pass) snat(ctx context.Context) error {
	cidrs, err := p.subnets(ctx)
	if err != nil {
		return err
	}
	return p.r.ops.nat(cidrs.nat, cidrs.all)
}

func (p *pass) subnets(ctx context.Context) (*subnetCIDRs, error) {
	if p.cidr != nil {
		return p.cidr, nil
	}
	var list kovnv1.SubnetList
	if err := p.r.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list subnets: %w", err)
	}
	c := desiredCIDRs(list.Items, p.r.Cfg.JoinSubnet)
	p.cidr = &c
	return p.cidr, nil
}
