package v1alpha1

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/kovn/kovn/api/v1alpha1/match"
)

// CIDRs parses cidrBlock: one or two canonical CIDRs, at most one per family, each large enough
// to hold a network address, a gateway and a pod (IPv4 /30, IPv6 /126).
func (s *SubnetSpec) CIDRs() ([]netip.Prefix, error) {
	if s.CIDRBlock == "" {
		return nil, fmt.Errorf("cidrBlock is empty")
	}
	parts, err := splitList(s.CIDRBlock)
	if err != nil {
		return nil, err
	}
	if len(parts) > 2 {
		return nil, fmt.Errorf("cidrBlock %q has %d CIDRs; at most one IPv4 and one IPv6 are allowed", s.CIDRBlock, len(parts))
	}
	out := make([]netip.Prefix, 0, len(parts))
	for _, c := range parts {
		p, err := ParsePrefix(c)
		if err != nil {
			return nil, err
		}
		if limit := p.Addr().BitLen() - 2; p.Bits() > limit {
			return nil, fmt.Errorf("CIDR %s is too small: an %s subnet must be /%d or larger", p, familyName(p.Addr()), limit)
		}
		out = append(out, p)
	}
	if len(out) == 2 && out[0].Addr().BitLen() == out[1].Addr().BitLen() {
		return nil, fmt.Errorf("cidrBlock %q has two %s CIDRs; dual stack needs one IPv4 and one IPv6", s.CIDRBlock, familyName(out[0].Addr()))
	}
	return out, nil
}

// ProtocolOf is the Protocol of a set of CIDRs as returned by CIDRs.
func ProtocolOf(cidrs []netip.Prefix) Protocol {
	switch {
	case len(cidrs) == 2:
		return ProtocolDual
	case len(cidrs) == 1 && cidrs[0].Addr().Is6():
		return ProtocolIPv6
	default:
		return ProtocolIPv4
	}
}

// DerivedProtocol is the protocol implied by cidrBlock, whatever spec.protocol says.
func (s *SubnetSpec) DerivedProtocol() (Protocol, error) {
	cidrs, err := s.CIDRs()
	if err != nil {
		return "", err
	}
	return ProtocolOf(cidrs), nil
}

// Gateways parses spec.gateway (nil when empty) without checking it against cidrBlock.
func (s *SubnetSpec) Gateways() ([]netip.Addr, error) {
	if s.Gateway == "" {
		return nil, nil
	}
	parts, err := splitList(s.Gateway)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(parts))
	for _, g := range parts {
		a, err := ParseAddr(g)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// EffectiveGateways returns one gateway per CIDR, in cidrBlock order: the configured one, or
// the first address after the network address when spec.gateway is empty. The spec must be
// valid (Validate returned nil).
func (s *SubnetSpec) EffectiveGateways() ([]netip.Addr, error) {
	cidrs, err := s.CIDRs()
	if err != nil {
		return nil, err
	}
	gws, err := s.Gateways()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(cidrs))
	for i, p := range cidrs {
		out[i] = p.Addr().Next()
		for _, g := range gws {
			if p.Contains(g) {
				out[i] = g
			}
		}
	}
	return out, nil
}

// ExcludeRanges parses excludeIps without checking them against cidrBlock.
func (s *SubnetSpec) ExcludeRanges() ([]IPRange, error) {
	out := make([]IPRange, 0, len(s.ExcludeIPs))
	for _, x := range s.ExcludeIPs {
		r, err := ParseIPRange(x)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Validate checks everything about a SubnetSpec that needs no other object. It repeats the CEL
// rules (objects may predate them, or come from a cluster without them) and adds what CEL cannot
// say: addresses against their CIDR, range order, network/broadcast gateways. The error is
// ValidationErrors; ReasonOf(err) gives the condition reason.
func (s *SubnetSpec) Validate() error {
	var errs ValidationErrors

	cidrs, err := s.CIDRs()
	if err != nil {
		errs.add("spec.cidrBlock", ReasonInvalidCIDR, "%v", err)
	}
	// The checks below compare against the CIDRs; without them they would only repeat the
	// cidrBlock error, so they run only on a valid cidrBlock.
	if cidrs != nil {
		s.validateAgainstCIDRs(cidrs, &errs)
	}

	switch s.Protocol {
	case "", ProtocolIPv4, ProtocolIPv6, ProtocolDual:
	default:
		errs.add("spec.protocol", ReasonProtocolMismatch, "protocol %q is not one of IPv4, IPv6, Dual", s.Protocol)
	}

	switch s.GatewayType {
	case "", GatewayDistributed:
	case GatewayCentralized:
		if len(s.GatewayNodes) == 0 {
			errs.add("spec.gatewayNodes", ReasonInvalidGatewayNodes, "gatewayNodes is required when gatewayType is centralized")
		}
	default:
		errs.add("spec.gatewayType", ReasonInvalidGatewayNodes, "gatewayType %q is not one of distributed, centralized", s.GatewayType)
	}
	for i, n := range s.GatewayNodes {
		if msgs := k8svalidation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs.add(fmt.Sprintf("spec.gatewayNodes[%d]", i), ReasonInvalidGatewayNodes, "%q is not a node name: %s", n, msgs[0])
		} else if slices.Index(s.GatewayNodes, n) != i {
			errs.add(fmt.Sprintf("spec.gatewayNodes[%d]", i), ReasonInvalidGatewayNodes, "node %q is listed twice", n)
		}
	}

	for i, c := range s.AllowSubnets {
		if _, err := ParsePrefix(c); err != nil {
			errs.add(fmt.Sprintf("spec.allowSubnets[%d]", i), ReasonInvalidAllowSubnets, "%v", err)
		}
	}
	validateNamespaces("spec.namespaces", s.Namespaces, &errs)
	s.validateProvider(&errs)
	s.validateVlan(&errs)
	s.validateACLs(&errs)
	s.PodBandwidth.validate(&errs)
	return errs.err()
}

// validateACLs checks each ACL as OVN would: a match northd cannot parse would be dropped
// with a line in its own log, and the rule silently missing.
func (s *SubnetSpec) validateACLs(errs *ValidationErrors) {
	for i, a := range s.ACLs {
		f := fmt.Sprintf("spec.acls[%d]", i)
		switch {
		case a.Direction != "to-lport" && a.Direction != "from-lport":
			errs.add(f+".direction", ReasonInvalidACL, "direction %q is not to-lport or from-lport", a.Direction)
		case a.Priority < 0 || a.Priority > 999:
			errs.add(f+".priority", ReasonInvalidACL, "priority %d is outside 0..999", a.Priority)
		case !slices.Contains([]string{"allow", "allow-related", "drop", "reject"}, a.Action):
			errs.add(f+".action", ReasonInvalidACL, "action %q is not allow, allow-related, drop or reject", a.Action)
		}
		if _, err := match.Check(a.Match); err != nil {
			errs.add(f+".match", ReasonInvalidACL, "match %q: %v", a.Match, err)
		}
	}
}

// validateProvider: an attachment network's subnet names its NetworkAttachmentDefinition as
// namespace/name and is no pod's default network.
func (s *SubnetSpec) validateProvider(errs *ValidationErrors) {
	if s.Provider == "" {
		return
	}
	ns, name, ok := strings.Cut(s.Provider, "/")
	switch {
	case !ok || len(k8svalidation.IsDNS1123Label(ns)) > 0 || len(k8svalidation.IsDNS1123Subdomain(name)) > 0:
		errs.add("spec.provider", ReasonInvalidProvider, "%q does not name a NetworkAttachmentDefinition as namespace/name", s.Provider)
	case s.Default:
		errs.add("spec.default", ReasonInvalidProvider, "an attachment network's subnet (provider %s) cannot be the default subnet", s.Provider)
	case len(s.Namespaces) > 0:
		errs.add("spec.namespaces", ReasonInvalidProvider, "an attachment network's subnet (provider %s) binds no namespace: pods attach to it through their networks annotation", s.Provider)
	}
}

// validateVlan: an underlay subnet's gateway is the physical router, so kovn has no egress
// of its own to centralize or make private; its VPC router is not attached either.
func (s *SubnetSpec) validateVlan(errs *ValidationErrors) {
	if s.Vlan == "" {
		return
	}
	if msgs := k8svalidation.IsDNS1123Subdomain(s.Vlan); len(msgs) > 0 {
		errs.add("spec.vlan", ReasonInvalidVlan, "%q is not a Vlan name: %s", s.Vlan, msgs[0])
	}
	if s.GatewayType == GatewayCentralized || len(s.GatewayNodes) > 0 {
		errs.add("spec.gatewayType", ReasonInvalidVlan, "an underlay subnet (vlan %s) leaves through its physical gateway: gatewayType centralized and gatewayNodes do not apply", s.Vlan)
	}
	if s.Private {
		errs.add("spec.private", ReasonInvalidVlan, "an underlay subnet (vlan %s) is reached on the physical network, which kovn's private ACLs cannot close", s.Vlan)
	}
	if s.Vpc != "" && s.Vpc != DefaultVpcName {
		errs.add("spec.vpc", ReasonInvalidVlan, "an underlay subnet (vlan %s) is not attached to a VPC router; leave vpc unset", s.Vlan)
	}
}

func (s *SubnetSpec) validateAgainstCIDRs(cidrs []netip.Prefix, errs *ValidationErrors) {
	if s.Protocol != "" && s.Protocol != ProtocolOf(cidrs) {
		errs.add("spec.protocol", ReasonProtocolMismatch, "protocol %s does not match cidrBlock %s (%s)", s.Protocol, s.CIDRBlock, ProtocolOf(cidrs))
	}

	gws, err := s.Gateways()
	switch {
	case err != nil:
		errs.add("spec.gateway", ReasonInvalidGateway, "%v", err)
	case len(gws) > 0 && len(gws) != len(cidrs):
		errs.add("spec.gateway", ReasonInvalidGateway, "gateway %q has %d addresses but cidrBlock %q has %d CIDRs; give one gateway per CIDR",
			s.Gateway, len(gws), s.CIDRBlock, len(cidrs))
	default:
		used := map[netip.Prefix]bool{}
		for _, g := range gws {
			p, ok := containing(cidrs, g)
			switch {
			case !ok:
				errs.add("spec.gateway", ReasonInvalidGateway, "gateway %s is outside cidrBlock %s", g, s.CIDRBlock)
			case used[p]:
				errs.add("spec.gateway", ReasonInvalidGateway, "two gateways in %s; give one per CIDR", p)
			case g == p.Addr():
				errs.add("spec.gateway", ReasonInvalidGateway, "gateway %s is the network address of %s", g, p)
			case g.Is4() && g == PrefixRange(p).Last:
				errs.add("spec.gateway", ReasonInvalidGateway, "gateway %s is the broadcast address of %s", g, p)
			}
			used[p] = true
		}
	}

	s.validateExternalGateway(cidrs, errs)
	for i, x := range s.ExcludeIPs {
		field := fmt.Sprintf("spec.excludeIps[%d]", i)
		r, err := ParseIPRange(x)
		if err != nil {
			errs.add(field, ReasonInvalidExcludeIPs, "%v", err)
			continue
		}
		if !slices.ContainsFunc(cidrs, r.InPrefix) {
			errs.add(field, ReasonInvalidExcludeIPs, "%s is outside cidrBlock %s", r, s.CIDRBlock)
		}
	}
}

// validateExternalGateway: only an underlay Subnet has one; one address per family of its
// CIDRs, each a usable address that is not the Subnet's gateway; node names.
func (s *SubnetSpec) validateExternalGateway(cidrs []netip.Prefix, errs *ValidationErrors) {
	eg := s.ExternalGateway
	if eg == nil {
		return
	}
	if s.Vlan == "" {
		errs.add("spec.externalGateway", ReasonInvalidExternalGateway, "only an underlay Subnet (spec.vlan) can be an external network")
	}
	gws, _ := s.EffectiveGateways()
	used := map[netip.Prefix]bool{}
	for i, a := range eg.Addresses {
		field := fmt.Sprintf("spec.externalGateway.addresses[%d]", i)
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" {
			errs.add(field, ReasonInvalidExternalGateway, "%q is not an IP address", a)
			continue
		}
		p, ok := containing(cidrs, ip)
		switch {
		case !ok:
			errs.add(field, ReasonInvalidExternalGateway, "%s is outside cidrBlock %s", ip, s.CIDRBlock)
		case used[p]:
			errs.add(field, ReasonInvalidExternalGateway, "two addresses in %s; give one per family", p)
		case ip == p.Addr() || ip.Is4() && ip == PrefixRange(p).Last:
			errs.add(field, ReasonInvalidExternalGateway, "%s is the network or broadcast address of %s", ip, p)
		case slices.Contains(gws, ip):
			errs.add(field, ReasonInvalidExternalGateway, "%s is the Subnet's gateway (the physical router)", ip)
		}
		used[p] = true
	}
	if len(eg.Nodes) == 0 && eg.NodeSelector == nil {
		errs.add("spec.externalGateway.nodes", ReasonInvalidExternalGateway, "name at least one node to host the gateway, or a nodeSelector")
	}
	if eg.NodeSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(eg.NodeSelector); err != nil {
			errs.add("spec.externalGateway.nodeSelector", ReasonInvalidExternalGateway, "%v", err)
		}
	}
	for i, n := range eg.Nodes {
		if msgs := k8svalidation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs.add(fmt.Sprintf("spec.externalGateway.nodes[%d]", i), ReasonInvalidExternalGateway, "%q is not a node name: %s", n, msgs[0])
		} else if slices.Index(eg.Nodes, n) != i {
			errs.add(fmt.Sprintf("spec.externalGateway.nodes[%d]", i), ReasonInvalidExternalGateway, "node %q is listed twice", n)
		}
	}
}

// ExternalGatewayAddrs are spec.externalGateway's addresses (nil without one; Validate first).
func (s *SubnetSpec) ExternalGatewayAddrs() []netip.Addr {
	if s.ExternalGateway == nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range s.ExternalGateway.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// containing returns the CIDR of cidrs that holds a.
func containing(cidrs []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, p := range cidrs {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func validateNamespaces(field string, nss []string, errs *ValidationErrors) {
	for i, ns := range nss {
		if msgs := k8svalidation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs.add(fmt.Sprintf("%s[%d]", field, i), ReasonInvalidNamespaces, "%q is not a namespace name: %s", ns, msgs[0])
		}
	}
}

// Overlaps returns the first pair of overlapping CIDRs of a and b. CIDRs that do not parse are
// ignored: Validate reports them.
func Overlaps(a, b *SubnetSpec) (pa, pb netip.Prefix, overlap bool) {
	ca, _ := a.CIDRs()
	cb, _ := b.CIDRs()
	for _, pa := range ca {
		for _, pb := range cb {
			if pa.Overlaps(pb) {
				return pa, pb, true
			}
		}
	}
	return netip.Prefix{}, netip.Prefix{}, false
}

// CheckOverlap returns a ValidationError with ReasonOverlap when a and b are different subnets
// of the same VPC with overlapping CIDRs: the VPC router could not route to both. Subnets of
// different VPCs sit behind different routers and may overlap. The error is meant for the subnet
// created later (the controller decides which one that is), so it names b as the other party.
func CheckOverlap(a, b *Subnet) error {
	if a.Name == b.Name || a.VpcName() != b.VpcName() {
		return nil
	}
	pa, pb, ok := Overlaps(&a.Spec, &b.Spec)
	if !ok {
		return nil
	}
	return &ValidationError{Field: "spec.cidrBlock", Reason: ReasonOverlap,
		Message: fmt.Sprintf("CIDR %s overlaps %s of subnet %s in VPC %s", pa, pb, b.Name, b.VpcName())}
}
