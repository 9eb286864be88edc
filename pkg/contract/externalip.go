package contract

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// A Service's spec.externalIPs are written by whoever may edit Services in its namespace: a
// tenant. Honoured as they are, one captures any address the cluster's nodes send to or
// receive for, the control plane's included (CVE-2020-8554). kovn-controller (OVN's load
// balancers) and every kovn-daemon (the node's DNAT, for traffic arriving and the node's own)
// apply these same rules, so the two never disagree about an address.

// ExternalIPRules decide which of a Service's spec.externalIPs kovn honours.
type ExternalIPRules struct {
	// Allowed are the admin's ranges (--external-ip-cidrs). Empty: no external IP is
	// honoured, as Kubernetes recommends.
	Allowed []netip.Prefix
	// Reserved are the cluster's own ranges: its Subnets, the join network, the Service CIDRs.
	Reserved []netip.Prefix
	// NodeAddrs are every node's addresses.
	NodeAddrs []netip.Addr
}

// ExternalIPClaims index every Service's addresses for ExternalIPs: ClusterIPs, and for each
// external IP the Service that claimed it first.
type ExternalIPClaims struct {
	clusterIPs map[netip.Addr]string
	owner      map[netip.Addr]string // the first claimant of an external IP, by key
}

// Claims indexes services: an external IP several Services name goes to the oldest (by
// creationTimestamp, then namespace/name), among those the rules would honour it for.
func (r ExternalIPRules) Claims(services []corev1.Service) ExternalIPClaims {
	c := ExternalIPClaims{clusterIPs: map[netip.Addr]string{}, owner: map[netip.Addr]string{}}
	older := map[netip.Addr]*corev1.Service{}
	for i := range services {
		svc := &services[i]
		for _, ip := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				c.clusterIPs[a] = serviceKey(svc)
			}
		}
	}
	for i := range services {
		svc := &services[i]
		for _, ip := range svc.Spec.ExternalIPs {
			a, err := netip.ParseAddr(ip)
			if err != nil || r.refusal(a, c) != "" {
				continue
			}
			if o := older[a]; o == nil || claimsFirst(svc, o) {
				older[a] = svc
				c.owner[a] = serviceKey(svc)
			}
		}
	}
	return c
}

// ExternalIPs returns the external IPs of svc kovn honours and, for each refused one, why.
func (r ExternalIPRules) ExternalIPs(svc *corev1.Service, claims ExternalIPClaims) (kept []netip.Addr, refused []string) {
	for _, ip := range svc.Spec.ExternalIPs {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			refused = append(refused, fmt.Sprintf("external IP %q is not an address", ip))
			continue
		}
		why := r.refusal(a, claims)
		if o := claims.owner[a]; why == "" && o != serviceKey(svc) {
			why = "Service " + o + " claimed it first"
		}
		if why != "" {
			refused = append(refused, fmt.Sprintf("external IP %s refused: %s", a, why))
			continue
		}
		kept = append(kept, a)
	}
	return kept, refused
}

// refusal says why address a may not be any Service's external IP ("" when it may).
func (r ExternalIPRules) refusal(a netip.Addr, claims ExternalIPClaims) string {
	a = a.Unmap()
	switch {
	case slices.ContainsFunc(r.Reserved, func(p netip.Prefix) bool { return p.Contains(a) }):
		return "it is inside the cluster's own ranges (Subnets, join, Services)"
	case slices.Contains(r.NodeAddrs, a):
		return "it is a node's address"
	case claims.clusterIPs[a] != "":
		return "it is the ClusterIP of Service " + claims.clusterIPs[a]
	case !slices.ContainsFunc(r.Allowed, func(p netip.Prefix) bool { return p.Contains(a) }):
		if len(r.Allowed) == 0 {
			return "no external IP range is allowed (kovn-controller and kovn-daemon --external-ip-cidrs)"
		}
		return fmt.Sprintf("it is outside the allowed ranges %v", r.Allowed)
	}
	return ""
}

func claimsFirst(a, b *corev1.Service) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return serviceKey(a) < serviceKey(b)
}

func serviceKey(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }
