package bgp

import (
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
)

// AnnotationBGP marks Services and pods for announcement (see annotation.BGP).
const AnnotationBGP = annotation.BGP

// Route is one prefix this node's speaker announces and why (the first reason found).
type Route struct {
	Prefix netip.Prefix
	Why    string
}

// Input is the cluster state the routes are computed from. Every address comes from state
// kovn or the apiserver owns: Subnet CIDRs (admin), IP objects (kovn-controller's IPAM),
// ClusterIPs (apiserver), load balancer ingress (the status subresource), and spec.externalIPs
// only inside ExternalIPCIDRs (admin). Annotations only choose among those addresses.
type Input struct {
	Node            string
	Subnets         []kovnv1.Subnet
	IPs             []kovnv1.IP
	AnnotatedPods   map[types.NamespacedName]bool // pods carrying AnnotationBGP "true"/"local"
	Services        []corev1.Service
	EndpointSlices  []discoveryv1.EndpointSlice
	ExternalIPCIDRs []netip.Prefix
}

// Desired is the set of routes node in.Node announces, sorted by prefix. It is a pure
// function of its input, so a speaker that recomputes it on every event and applies the
// difference is level-triggered.
func Desired(in Input) []Route {
	out := map[netip.Prefix]string{}
	add := func(p netip.Prefix, why string) {
		if _, ok := out[p]; !ok {
			out[p] = why
		}
	}
	subnets := advertisedSubnets(in.Subnets)
	for _, sn := range subnets {
		if sn.policy == kovnv1.BGPPolicyCluster {
			for _, p := range sn.cidrs {
				add(p, "subnet "+sn.name)
			}
		}
	}
	for i := range in.IPs {
		ip := &in.IPs[i]
		sn, ok := subnets[ip.Spec.Subnet]
		if !ok || ip.Spec.NodeName != in.Node || ip.Spec.PodName == "" {
			continue
		}
		pod := types.NamespacedName{Namespace: ip.Spec.Namespace, Name: ip.Spec.PodName}
		why := "pod " + pod.String()
		if sn.policy != kovnv1.BGPPolicyLocal && !in.AnnotatedPods[pod] {
			continue
		}
		for _, s := range []string{ip.Spec.V4IP, ip.Spec.V6IP} {
			if a, err := netip.ParseAddr(s); err == nil && sn.contains(a) {
				add(netip.PrefixFrom(a, a.BitLen()), why)
			}
		}
	}
	local := localEndpointServices(in.EndpointSlices, in.Node)
	for i := range in.Services {
		svc := &in.Services[i]
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		switch servicePolicy(svc) {
		case "":
			continue
		case kovnv1.BGPPolicyLocal:
			if !local[key] {
				continue
			}
		}
		for _, a := range serviceAddrs(svc, in.ExternalIPCIDRs) {
			add(netip.PrefixFrom(a, a.BitLen()), "service "+key.String())
		}
	}
	routes := make([]Route, 0, len(out))
	for p, why := range out {
		routes = append(routes, Route{Prefix: p, Why: why})
	}
	sort.Slice(routes, func(i, j int) bool { return comparePrefix(routes[i].Prefix, routes[j].Prefix) < 0 })
	return routes
}

type advertisedSubnet struct {
	name   string
	policy kovnv1.BGPPolicy
	cidrs  []netip.Prefix
}

func (s advertisedSubnet) contains(a netip.Addr) bool {
	for _, p := range s.cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// advertisedSubnets are the default VPC's subnets with bgpAdvertise on whose spec the controller
// has not refused (an overlapping or invalid subnet is never announced).
func advertisedSubnets(subnets []kovnv1.Subnet) map[string]advertisedSubnet {
	out := map[string]advertisedSubnet{}
	for i := range subnets {
		sn := &subnets[i]
		if !sn.Spec.BGPAdvertise || sn.VpcName() != kovnv1.DefaultVpcName || sn.Spec.Vlan != "" {
			continue
		}
		if c := meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionValidated); c != nil && c.Status != "True" {
			continue
		}
		a := advertisedSubnet{name: sn.Name, policy: sn.Spec.BGPPolicy}
		if a.policy == "" {
			a.policy = kovnv1.BGPPolicyCluster
		}
		for _, s := range strings.Split(sn.Spec.CIDRBlock, ",") {
			if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
				a.cidrs = append(a.cidrs, p.Masked())
			}
		}
		if len(a.cidrs) > 0 {
			out[sn.Name] = a
		}
	}
	return out
}

// servicePolicy is who announces an annotated Service: "" (not announced), Cluster or Local.
func servicePolicy(svc *corev1.Service) kovnv1.BGPPolicy {
	return kovnv1.BGPPolicy(annotation.BGPServicePolicy(svc.Annotations[AnnotationBGP],
		svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal))
}

// serviceAddrs are a Service's ClusterIPs, load balancer ingress IPs and the externalIPs inside
// the admin's allowed ranges (anyone who may edit a Service may write spec.externalIPs).
func serviceAddrs(svc *corev1.Service, allowedExternal []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil {
			out = append(out, a)
		}
	}
	for _, s := range svc.Spec.ExternalIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		for _, p := range allowedExternal {
			if p.Contains(a) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// localEndpointServices are the Services with a ready, not terminating endpoint on node.
func localEndpointServices(slices []discoveryv1.EndpointSlice, node string) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for i := range slices {
		es := &slices[i]
		svc := es.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		for _, ep := range es.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
			if ep.NodeName != nil && *ep.NodeName == node && ready && !terminating {
				out[types.NamespacedName{Namespace: es.Namespace, Name: svc}] = true
			}
		}
	}
	return out
}

// comparePrefix orders IPv4 before IPv6, then by address, then shorter first.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
