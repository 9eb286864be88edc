package v1alpha1

import (
	"fmt"
	"net"
	"slices"
)

// Ranges parses the pool's ips without checking them against the subnet.
func (p *IPPoolSpec) Ranges() ([]IPRange, error) {
	out := make([]IPRange, 0, len(p.IPs))
	for _, x := range p.IPs {
		r, err := ParsePoolEntry(x)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Validate checks what needs no other object (see ValidateInSubnet for the rest).
func (p *IPPoolSpec) Validate() error {
	var errs ValidationErrors
	if p.Subnet == "" {
		errs.add("spec.subnet", ReasonMissingField, "subnet is required")
	}
	if len(p.IPs) == 0 {
		errs.add("spec.ips", ReasonInvalidIPs, "ips is empty")
	}
	for i, x := range p.IPs {
		if _, err := ParsePoolEntry(x); err != nil {
			errs.add(fmt.Sprintf("spec.ips[%d]", i), ReasonInvalidIPs, "%v", err)
		}
	}
	validateNamespaces("spec.namespaces", p.Namespaces, &errs)
	return errs.err()
}

// ValidateInSubnet checks that every entry lies inside one CIDR of the pool's subnet.
func (p *IPPoolSpec) ValidateInSubnet(subnet *SubnetSpec) error {
	cidrs, err := subnet.CIDRs()
	if err != nil {
		return ValidationErrors{{Field: "spec.subnet", Reason: ReasonInvalidCIDR, Message: fmt.Sprintf("subnet %s is invalid: %v", p.Subnet, err)}}
	}
	var errs ValidationErrors
	for i, x := range p.IPs {
		r, err := ParsePoolEntry(x)
		if err != nil {
			errs.add(fmt.Sprintf("spec.ips[%d]", i), ReasonInvalidIPs, "%v", err)
			continue
		}
		if !slices.ContainsFunc(cidrs, r.InPrefix) {
			errs.add(fmt.Sprintf("spec.ips[%d]", i), ReasonOutsideSubnet, "%s is outside subnet %s (%s)", r, p.Subnet, subnet.CIDRBlock)
		}
	}
	return errs.err()
}

// CheckPoolOverlap returns a ValidationError with ReasonOverlap when two different pools of the
// same subnet share an address: IPAM could not tell which pool a pod's address belongs to.
func CheckPoolOverlap(a, b *IPPool) error {
	if a.Name == b.Name || a.Spec.Subnet != b.Spec.Subnet {
		return nil
	}
	ra, _ := a.Spec.Ranges()
	rb, _ := b.Spec.Ranges()
	for _, x := range ra {
		for _, y := range rb {
			if x.Overlaps(y) {
				return &ValidationError{Field: "spec.ips", Reason: ReasonOverlap,
					Message: fmt.Sprintf("%s overlaps %s of IPPool %s in subnet %s", x, y, b.Name, b.Spec.Subnet)}
			}
		}
	}
	return nil
}

// Validate checks an IP object as the controller writes it.
func (s *IPSpec) Validate() error {
	var errs ValidationErrors
	if s.Subnet == "" {
		errs.add("spec.subnet", ReasonMissingField, "subnet is required")
	}
	if s.V4IP == "" && s.V6IP == "" {
		errs.add("spec", ReasonInvalidIPs, "at least one of v4IP and v6IP is required")
	}
	checkFamily := func(field, v string, want4 bool) {
		if v == "" {
			return
		}
		a, err := ParseAddr(v)
		if err != nil {
			errs.add(field, ReasonInvalidIPs, "%v", err)
		} else if a.Is4() != want4 {
			errs.add(field, ReasonInvalidIPs, "%s is an %s address", a, familyName(a))
		}
	}
	checkFamily("spec.v4IP", s.V4IP, true)
	checkFamily("spec.v6IP", s.V6IP, false)
	if s.MACAddress != "" {
		if err := ValidateMAC(s.MACAddress); err != nil {
			errs.add("spec.macAddress", ReasonInvalidMAC, "%v", err)
		}
	}
	return errs.err()
}

// ValidateMAC accepts a unicast 48-bit MAC in lower-case colon form, the form OVN port
// addresses and the CRD pattern use (a multicast source MAC would be dropped by every switch).
func ValidateMAC(s string) error {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return fmt.Errorf("%q is not a 48-bit MAC address", s)
	}
	if hw.String() != s {
		return fmt.Errorf("%q is not in lower-case colon form (%s)", s, hw)
	}
	if hw[0]&1 != 0 {
		return fmt.Errorf("%s is a multicast MAC address", s)
	}
	return nil
}

// Validate checks the VPC's routes.
func (s *VpcSpec) Validate() error {
	var errs ValidationErrors
	validateNamespaces("spec.namespaces", s.Namespaces, &errs)
	for i, r := range s.StaticRoutes {
		field := fmt.Sprintf("spec.staticRoutes[%d]", i)
		p, perr := ParsePrefix(r.CIDR)
		if perr != nil {
			errs.add(field+".cidr", ReasonInvalidRoute, "%v", perr)
		}
		nh, nerr := ParseAddr(r.NextHopIP)
		if nerr != nil {
			errs.add(field+".nextHopIP", ReasonInvalidRoute, "%v", nerr)
		}
		if perr == nil && nerr == nil && p.Addr().Is4() != nh.Is4() {
			errs.add(field, ReasonInvalidRoute, "cidr %s and nextHopIP %s are of different IP families", p, nh)
		}
		if r.Policy != "" && r.Policy != RoutePolicyDestination && r.Policy != RoutePolicySource {
			errs.add(field+".policy", ReasonInvalidRoute, "policy %q is not one of destination, source", r.Policy)
		}
	}
	for i, r := range s.PolicyRoutes {
		field := fmt.Sprintf("spec.policyRoutes[%d]", i)
		if r.Priority < 0 || r.Priority > 32767 {
			errs.add(field+".priority", ReasonInvalidRoute, "priority %d is outside 0..32767", r.Priority)
		}
		if r.Match == "" {
			errs.add(field+".match", ReasonInvalidRoute, "match is empty")
		}
		switch r.Action {
		case PolicyRouteAllow, PolicyRouteDrop:
		case PolicyRouteReroute:
			if r.NextHopIP == "" {
				errs.add(field+".nextHopIP", ReasonInvalidRoute, "nextHopIP is required when action is reroute")
			}
		default:
			errs.add(field+".action", ReasonInvalidRoute, "action %q is not one of allow, drop, reroute", r.Action)
		}
		if r.NextHopIP != "" {
			if _, err := ParseAddr(r.NextHopIP); err != nil {
				errs.add(field+".nextHopIP", ReasonInvalidRoute, "%v", err)
			}
		}
	}
	return errs.err()
}
