package topology

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kovn/kovn/pkg/endpoints"
)

// OwnerService owns a Service's load balancers.
const OwnerService = "Service"

// ClusterLBGroup is the load balancer group every Service's load balancers join and every
// switch of the VPC holding the join subnet references: one reference per switch instead of
// one per Service (OVN Load_Balancer_Group). Every client enters through a switch (pods on
// theirs, nodes through ovn0 on the join switch), where the load balancer translates the VIP;
// the router is distributed and has no gateway port, on which OVN cannot load-balance.
const ClusterLBGroup = "kovn-cluster-lbs"

// ServiceIn is a Service with its endpoints, as the reconciler read them.
type ServiceIn struct {
	Namespace, Name string
	// VIPs: ClusterIPs, then external IPs and load balancer ingress IPs.
	VIPs  []netip.Addr
	Ports []ServicePortIn
	// Endpoints of every EndpointSlice of the Service. An endpoint's port numbers come from
	// its own slice, so a named targetPort resolves per endpoint (pods of one Service may
	// name different numbers, e.g. during a rolling update).
	Endpoints []EndpointIn
	// AffinityTimeout is the ClientIP session affinity timeout in seconds; 0: no affinity.
	AffinityTimeout int32
	// InternalLocal is internalTrafficPolicy=Local: the first NClusterIPs VIPs (the
	// ClusterIPs) reach only endpoints on the client's own node. Chassis are every node's
	// chassis name (the node name), each of which gets its own backend list.
	InternalLocal bool
	NClusterIPs   int
	Chassis       []string
}

// ServicePortIn is one port of a Service.
type ServicePortIn struct {
	Name     string
	Protocol string // TCP | UDP | SCTP
	Port     int32
}

// EndpointIn is one address of an EndpointSlice with the slice's port numbers by port name.
type EndpointIn = endpoints.Endpoint

// maxAffinityTimeout is the largest affinity_timeout OVN takes.
const maxAffinityTimeout = 65535

// ForService is a Service's shard: one load balancer per protocol, in the cluster group,
// mapping every VIP and port to the endpoints that may take traffic. A VIP with no such
// endpoint stays, with no backend, so OVN rejects connections to it at once (reject=true)
// instead of letting them time out. On UDP and SCTP load balancers, ct_flush makes
// ovn-controller flush the conntrack entries of a backend that leaves: otherwise a UDP flow
// (one conntrack entry for as long as it keeps sending) stays pinned to a deleted pod. TCP
// load balancers keep them, as kube-proxy does: a backend leaves the load balancer when it
// starts terminating, and its open connections must finish on it (flushing them reset every
// request in flight to the old pods of a rolling update).
func ForService(s ServiceIn) Shard {
	owner := s.Namespace + "/" + s.Name
	sh := Shard{OwnerType: OwnerService, Owner: owner}
	byProto := map[string]*LoadBalancer{}
	for _, p := range s.Ports {
		proto := strings.ToLower(p.Protocol)
		lb := byProto[proto]
		if lb == nil {
			opts := map[string]string{"reject": "true"}
			if proto != "tcp" {
				opts["ct_flush"] = "true"
			}
			lb = serviceLB(ServiceLBName(s.Namespace, s.Name, p.Protocol), proto, owner, opts)
			if s.AffinityTimeout > 0 {
				lb.Options["affinity_timeout"] = strconv.Itoa(int(min(s.AffinityTimeout, maxAffinityTimeout)))
			}
			byProto[proto] = lb
		}
		backends := usableEndpoints(s.Endpoints, p.Name)
		for i, vip := range s.VIPs {
			if s.InternalLocal && i < s.NClusterIPs {
				continue // in the node-local template load balancer below
			}
			lb.VIPs[hostPort(vip, p.Port)] = backendList(backends, p.Name, vip.Is4())
		}
	}
	for _, proto := range []string{"tcp", "udp", "sctp"} {
		if lb := byProto[proto]; lb != nil && len(lb.VIPs) > 0 { // none: all its VIPs are node-local
			sh.LoadBalancers = append(sh.LoadBalancers, *lb)
		}
	}
	if s.InternalLocal {
		addNodeLocalLBs(&sh, s)
	}
	return sh
}

// addNodeLocalLBs adds internalTrafficPolicy=Local: a template load balancer per protocol and
// family whose ClusterIP VIPs map to a template variable, which each chassis defines as its
// own node's ready endpoints. A load balancer runs on the chassis of the client's port, so a
// pod (or a node through ovn0) reaches only endpoints on its own node. A node with none gets an
// empty list: ovn-controller then installs no flow for the VIP and the traffic is dropped, as
// kube-proxy drops it (northd can only reject for backends it sees empty itself).
func addNodeLocalLBs(sh *Shard, s ServiceIn) {
	owner := s.Namespace + "/" + s.Name
	sh.TemplateVars = map[string]map[string]string{}
	for _, ch := range s.Chassis {
		sh.TemplateVars[ch] = map[string]string{}
	}
	byKey := map[string]*LoadBalancer{}
	var keys []string
	for _, p := range s.Ports {
		for _, vip := range s.VIPs[:min(s.NClusterIPs, len(s.VIPs))] {
			fam := map[bool]string{true: "ipv4", false: "ipv6"}[vip.Is4()]
			proto := strings.ToLower(p.Protocol)
			lb := byKey[proto+"_"+fam]
			if lb == nil {
				lb = serviceLB(ServiceLBName(s.Namespace, s.Name, p.Protocol)+"_local_"+fam, proto, owner,
					map[string]string{"reject": "true", "template": "true", "address-family": fam})
				byKey[proto+"_"+fam] = lb
				keys = append(keys, proto+"_"+fam)
			}
			key, value := nodeLocalVIP(sh, s, owner, vip, p)
			lb.VIPs[key] = value
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		sh.LoadBalancers = append(sh.LoadBalancers, *byKey[k])
	}
}

// nodeLocalVIP returns the template load balancer entry of one VIP and port and defines its
// variables on every chassis: the backends, that chassis's node's usable endpoints. OVN splits
// a template VIP key at every ':', so an IPv6 VIP cannot be written out: it is a variable too,
// the same on every chassis.
func nodeLocalVIP(sh *Shard, s ServiceIn, owner string, vip netip.Addr, p ServicePortIn) (key, value string) {
	prefix := TemplateVarPrefix(OwnerService, owner)
	backends := prefix + shortHash(fmt.Sprintf("%s/%s/%d/%t", p.Name, strings.ToLower(p.Protocol), p.Port, vip.Is4()))
	key = hostPort(vip, p.Port)
	vipVar := prefix + shortHash("vip/"+vip.String())
	if vip.Is6() {
		key = fmt.Sprintf("^%s:%d", vipVar, p.Port)
	}
	for _, ch := range s.Chassis {
		sh.TemplateVars[ch][backends] = backendList(usableEndpoints(onNode(s.Endpoints, ch), p.Name), p.Name, vip.Is4())
		if vip.Is6() {
			sh.TemplateVars[ch][vipVar] = vip.String()
		}
	}
	return key, "^" + backends
}

// TemplateVarPrefix starts the names of the template variables an owner's shard defines.
// It depends on the owner alone, so that an empty shard (the Service is gone) finds them.
func TemplateVarPrefix(ownerType, owner string) string {
	if ownerType != OwnerService {
		return ""
	}
	return "KOVN_" + shortHash(owner) + "_"
}

func onNode(eps []EndpointIn, node string) []EndpointIn {
	var out []EndpointIn
	for _, e := range eps {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out
}

// serviceLB is an empty load balancer of a Service (owner), in the cluster group.
func serviceLB(name, proto, owner string, options map[string]string) *LoadBalancer {
	return &LoadBalancer{Name: name, Protocol: proto, VIPs: map[string]string{}, Options: options,
		Groups: []string{ClusterLBGroup}, ExternalIDs: map[string]string{"service": owner}}
}

// ServiceLBName names a Service's load balancer of one protocol.
func ServiceLBName(namespace, name, protocol string) string {
	return fmt.Sprintf("Service_%s/%s_%s", namespace, name, strings.ToUpper(protocol))
}

// usableEndpoints are the endpoints serving the named port that take new connections
// (endpoints.Usable: ready ones first, else serving terminating ones).
func usableEndpoints(eps []EndpointIn, port string) []EndpointIn {
	usable, _ := endpoints.Usable(eps, func(e EndpointIn) bool { _, ok := e.Ports[port]; return ok })
	return usable
}

// backendList renders the endpoints of one family as OVN's "ip:port,ip:port", sorted so an
// unchanged Service renders the same string.
func backendList(eps []EndpointIn, port string, v4 bool) string {
	var out []string
	for _, e := range eps {
		if e.Addr.Is4() == v4 {
			out = append(out, hostPort(e.Addr, e.Ports[port]))
		}
	}
	sort.Strings(out)
	return strings.Join(slices.Compact(out), ",")
}

func hostPort(a netip.Addr, port int32) string {
	return netip.AddrPortFrom(a, uint16(port)).String()
}
