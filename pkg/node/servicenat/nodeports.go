package servicenat

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/kovn/kovn/pkg/endpoints"
	"github.com/kovn/kovn/pkg/node/bootstrap"
)

// NodePorts and external IPs enter the cluster on the node that receives them: kovn-daemon
// translates them in the node's own packet filter to the Service's ClusterIP, which the node
// routes through ovn0 to the Service's OVN load balancer on the join switch (the same path as
// the node's own traffic to a ClusterIP). Such connections are masqueraded to the node's join
// address so replies come back through this node. externalTrafficPolicy=Local Services are
// translated straight to this node's own ready endpoints and not masqueraded: the backend sees
// the client's address, and its reply leaves through its own node (this one), where the
// translation is undone. Without a local endpoint the traffic is rejected (the nat table
// cannot filter: the reject rule sits in the filter table and sees what nat left untranslated).
const (
	nodePortChain       = "KOVN-NODEPORTS"       // nat PREROUTING and OUTPUT
	nodePortMasqChain   = "KOVN-NODEPORT-MASQ"   // nat POSTROUTING
	nodePortRejectChain = "KOVN-NODEPORT-REJECT" // filter INPUT and FORWARD
	nodePortMark        = "0x4000/0x4000"
)

// The ipsets of this node's own pods' addresses, one per family: an ETP=Local Service's
// internal clients (see NodePortService.PodSources). A set, not a rule per pod: a pod that
// comes or goes changes the set and leaves the rules as they are.
const (
	ownPodsSet4 = "KOVN-OWN-PODS4"
	ownPodsSet6 = "KOVN-OWN-PODS6"
)

// OwnPodsSet is the name of the family's ipset of this node's pods.
func OwnPodsSet(is4 bool) string {
	if is4 {
		return ownPodsSet4
	}
	return ownPodsSet6
}

// enterOverlayMasq translates every other connection this node forwards into the overlay from
// outside (the control plane reaching a pod or a ClusterIP for webhooks, aggregated APIs and
// pods/proxy; anything routed to this node for the cluster's ranges) to the node's masquerade
// address (see masqTarget). The pod's reply then returns through this node: untranslated, it
// would leave through the pod's own node, be masqueraded there as pod egress and never match.
// Traffic the node itself sends keeps its source, and so does traffic already translated to a
// pod here (externalTrafficPolicy=Local, hostPort), whose client address the pod must see.
func enterOverlayMasq(masq netip.Addr) string {
	return "-A " + nodePortMasqChain + " -o " + bootstrap.Ovn0 +
		" -m addrtype ! --src-type LOCAL -m conntrack ! --ctstate DNAT " + masqTarget(masq)
}

// masqTarget is where a connection forwarded into the overlay for someone else gets its
// source: the node's masquerade address, a join address OVN delivers to this node's ovn0 but
// that no ACL admits by itself (contract.NodeMasqIPName). MASQUERADE would give it ovn0's
// own join address, which reaches this node's pods past every NetworkPolicy (the kubelet's
// probes need that): a NodePort or a route to the node would then bypass the pod's policy.
// Without a masquerade address yet (the controller has not recorded one), MASQUERADE.
func masqTarget(masq netip.Addr) string {
	if !masq.IsValid() {
		return "-j MASQUERADE"
	}
	return "-j SNAT --to-source " + masq.String()
}

// markedMasq is the rules for connections kovn's mark asks to masquerade (NodePorts of
// ETP=Cluster, hostPorts): into the overlay, the node's masquerade address; out of any other
// interface, the address of that interface.
func markedMasq(chain string, masq netip.Addr) string {
	if !masq.IsValid() {
		return fmt.Sprintf("-A %s -m mark --mark %s -j MASQUERADE\n", chain, nodePortMark)
	}
	return fmt.Sprintf("-A %s -m mark --mark %s -o %s %s\n-A %s -m mark --mark %s -j MASQUERADE\n",
		chain, nodePortMark, bootstrap.Ovn0, masqTarget(masq), chain, nodePortMark)
}

// Destinations whose replies come back through this node anyway keep the client's address
// (keepSource): this node's own pods in distributed-gateway subnets, whose egress is this
// node, where conntrack sees both directions. That is how a client outside the cluster, routed
// in over BGP to the node hosting a pod (a Local-policy route), reaches it with its own
// address. Traffic for a pod on another node is still masqueraded: its reply would leave
// through that node, and OVN's stateful stages there drop a reply they never saw the start of.

// leaveOverlayMasq masquerades the node's own connections that it translated itself
// (hostEndpoints) to an address outside the overlay, another node's host network: the node
// routed the ClusterIP through ovn0, so the connection took ovn0's join address as its source
// before the translation, and that node's reply to a join address would go into its own ovn0
// and never come back to this node's translation. Masqueraded, the connection leaves with the
// address of the interface it leaves through, as kube-proxy's masquerade of node-to-ClusterIP
// traffic does. The node's own address (delivered locally) keeps the source.
func leaveOverlayMasq(join netip.Prefix) string {
	return fmt.Sprintf("-A %s -s %s ! -o %s -m addrtype --src-type LOCAL ! --dst-type LOCAL -m conntrack --ctstate DNAT -j MASQUERADE",
		nodePortMasqChain, join.Masked(), bootstrap.Ovn0)
}

// NodeSide is what the node's rules need besides the Services: KeepSource (destinations that
// keep the client's address, see keepSourcePrefixes), Join, the join subnet's CIDRs (see
// leaveOverlayMasq), Masq, the node's masquerade addresses (see masqTarget), and PeerAddrs,
// the other nodes' addresses by node name (see NodePortService.Peers).
type NodeSide struct {
	KeepSource []netip.Prefix
	Join       []netip.Prefix
	Masq       []netip.Addr
	PeerAddrs  map[string][]netip.Addr
}

// NodePortService is what the node translates for one Service.
type NodePortService struct {
	Key         string       // namespace/name, for rule comments
	ClusterIPs  []netip.Addr // the DNAT target of ETP=Cluster traffic
	ExternalIPs []netip.Addr // spec.externalIPs and load balancer ingress IPs
	// OutsideClusterIPs: the Service is announced over BGP with the Local policy, so traffic
	// from outside arrives here for its ClusterIPs; it goes to this node's endpoints only
	// (like ETP=Local), unmasqueraded. Traffic the node itself sends is left to OVN.
	OutsideClusterIPs bool
	Ports             []NodePortPort
	// LocalOnly: externalTrafficPolicy=Local; LocalEndpoints are this node's endpoints that
	// take new connections (see localEndpoints).
	LocalOnly      bool
	LocalEndpoints []LocalEndpoint
	// PodSources (with LocalOnly) are the cluster's pod CIDRs. This node's own pods (the
	// OwnPodsSet ipset) and the node itself are internal clients, as kube-proxy's detect-local
	// by node has it: any endpoint serves them, through the ClusterIP, masqueraded like
	// ETP=Cluster traffic. Every other client is external and held to this node's endpoints; a
	// pod of another node among them is masqueraded, or its reply would go from pod to pod
	// through OVN, around this node's translation.
	PodSources []netip.Prefix
	// HealthCheckNodePort (an ETP=Local LoadBalancer's) is answered by this node with
	// LocalReady, its ready endpoints here (LocalEndpoints may be terminating ones).
	HealthCheckNodePort int32
	LocalReady          int
	// Peers (with LocalOnly) are the other nodes' endpoints of the Service that take new
	// connections, by node. The node's own connections to another node's ETP=Local NodePort
	// are translated here, to that node's endpoints, keeping the node's address: sent to that
	// node, they would be translated there without masquerade (an external client), and the
	// pod's reply to this node's address would go from the pod through OVN straight to this
	// node's ovn0, around that node's translation. kube-proxy's nodes reach each other's Local
	// NodePorts, with their own address seen by the endpoint (Kubernetes' e2e "should support
	// externalTrafficPolicy=Local for type=NodePort"). A node without endpoints gets no rule:
	// the traffic reaches that node, which refuses it.
	Peers []PeerEndpoints
	// HostEndpoints, when set, are where the node's own traffic to the ClusterIPs goes, chosen
	// here instead of by OVN: one of them is the node's own address (see hostEndpoints).
	HostEndpoints []LocalEndpoint
}

// PeerEndpoints are another node's endpoints of a Service.
type PeerEndpoints struct {
	Node      string
	Endpoints []LocalEndpoint
}

// NodePortPort is one Service port; NodePort is 0 when the Service has none.
type NodePortPort struct {
	Name     string
	Protocol string // TCP | UDP | SCTP
	Port     int32
	NodePort int32
}

// LocalEndpoint is an endpoint on this node with its port numbers by Service port name.
type LocalEndpoint = endpoints.Endpoint

// NodePortRules is the iptables-restore input rewriting both chains for one family. Services
// are sorted by key and endpoints by address, so the same input always gives the same text
// (an unchanged cluster causes no rewrite).
func NodePortRules(is4 bool, svcs []NodePortService, node NodeSide) string {
	var b, reject strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n:%s - [0:0]\n", nodePortChain, nodePortMasqChain)
	masq, _ := firstOfFamily(node.Masq, is4)
	b.WriteString(markedMasq(nodePortMasqChain, masq))
	keep := append([]netip.Prefix(nil), node.KeepSource...)
	sort.Slice(keep, func(i, j int) bool { return keep[i].String() < keep[j].String() })
	for _, p := range keep {
		if p.Addr().Is4() == is4 {
			fmt.Fprintf(&b, "-A %s -o %s -d %s -j RETURN\n", nodePortMasqChain, bootstrap.Ovn0, p)
		}
	}
	fmt.Fprintf(&b, "%s\n", enterOverlayMasq(masq))
	for _, p := range node.Join {
		if p.Addr().Is4() == is4 {
			fmt.Fprintf(&b, "%s\n", leaveOverlayMasq(p))
		}
	}
	sorted := append([]NodePortService(nil), svcs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	for _, s := range sorted {
		cip, ok := firstOfFamily(s.ClusterIPs, is4)
		if !ok {
			continue
		}
		for _, p := range s.Ports {
			proto := strings.ToLower(p.Protocol)
			if targets := localTargets(s.HostEndpoints, p.Name, is4); len(targets) > 0 {
				m := fmt.Sprintf("-m addrtype --src-type LOCAL -d %s -p %s --dport %d", netip.PrefixFrom(cip, cip.BitLen()), proto, p.Port)
				writeLocalTargets(&b, fmt.Sprintf("-A %s %s -m comment --comment %q", nodePortChain, m, s.Key+":"+p.Name), targets)
			}
			var matches []string
			if p.NodePort > 0 {
				matches = append(matches, fmt.Sprintf("-m addrtype --dst-type LOCAL -p %s --dport %d", proto, p.NodePort))
			}
			for _, ip := range s.ExternalIPs {
				if ip.Is4() == is4 {
					matches = append(matches, fmt.Sprintf("-d %s -p %s --dport %d", netip.PrefixFrom(ip, ip.BitLen()), proto, p.Port))
				}
			}
			if s.OutsideClusterIPs {
				m := fmt.Sprintf("-d %s -p %s --dport %d -m addrtype ! --src-type LOCAL", netip.PrefixFrom(cip, cip.BitLen()), proto, p.Port)
				head := fmt.Sprintf("-A %s %s -m comment --comment %q", nodePortChain, m, s.Key+":"+p.Name)
				if !writeLocalTargets(&b, head, localTargets(s.LocalEndpoints, p.Name, is4)) {
					fmt.Fprintf(&reject, "-A %s %s -m comment --comment %q -j REJECT\n", nodePortRejectChain, m, s.Key+":"+p.Name)
				}
			}
			if s.LocalOnly && p.NodePort > 0 {
				writePeerTargets(&b, s, p, is4, node.PeerAddrs)
			}
			for _, m := range matches {
				head := fmt.Sprintf("-A %s %s -m comment --comment %q", nodePortChain, m, s.Key+":"+p.Name)
				if s.LocalOnly {
					for _, src := range internalSources(is4) {
						internal := fmt.Sprintf("-A %s %s %s -m comment --comment %q", nodePortChain, src, m, s.Key+":"+p.Name)
						fmt.Fprintf(&b, "%s -j MARK --set-xmark %s\n", internal, nodePortMark)
						fmt.Fprintf(&b, "%s -j DNAT --to-destination %s\n", internal, netip.AddrPortFrom(cip, uint16(p.Port)))
					}
					for _, src := range sourceMatches(s.PodSources, is4) {
						fmt.Fprintf(&b, "-A %s %s %s -m comment --comment %q -j MARK --set-xmark %s\n", nodePortChain, src, m, s.Key+":"+p.Name, nodePortMark)
					}
					if !writeLocalTargets(&b, head, localTargets(s.LocalEndpoints, p.Name, is4)) {
						fmt.Fprintf(&reject, "-A %s %s -m comment --comment %q -j REJECT\n", nodePortRejectChain, m, s.Key+":"+p.Name)
					}
					continue
				}
				fmt.Fprintf(&b, "%s -j MARK --set-xmark %s\n", head, nodePortMark)
				// A Service served from this node's host network: through the ClusterIP, OVN
				// would send the node's own endpoint back out of ovn0 (a martian here), so the
				// node spreads its NodePort over the endpoints itself, masqueraded as above.
				if !writeLocalTargets(&b, head, localTargets(s.HostEndpoints, p.Name, is4)) {
					fmt.Fprintf(&b, "%s -j DNAT --to-destination %s\n", head, netip.AddrPortFrom(cip, uint16(p.Port)))
				}
			}
		}
	}
	b.WriteString("COMMIT\n")
	fmt.Fprintf(&b, "*filter\n:%s - [0:0]\n%sCOMMIT\n", nodePortRejectChain, reject.String())
	return b.String()
}

// writePeerTargets translates the node's own connections to another node's address and this
// port's NodePort to that node's endpoints (NodePortService.Peers), unmasqueraded.
func writePeerTargets(b *strings.Builder, s NodePortService, p NodePortPort, is4 bool, peerAddrs map[string][]netip.Addr) {
	for _, peer := range s.Peers {
		targets := localTargets(peer.Endpoints, p.Name, is4)
		if len(targets) == 0 {
			continue
		}
		for _, a := range peerAddrs[peer.Node] { // sorted, each once (peerAddrs)
			if a.Is4() != is4 {
				continue
			}
			m := fmt.Sprintf("-m addrtype --src-type LOCAL -d %s -p %s --dport %d", netip.PrefixFrom(a, a.BitLen()), strings.ToLower(p.Protocol), p.NodePort)
			writeLocalTargets(b, fmt.Sprintf("-A %s %s -m comment --comment %q", nodePortChain, m, s.Key+":"+p.Name+"@"+peer.Node), targets)
		}
	}
}

// internalSources are the source matches of an ETP=Local Service's internal clients in one
// family: the node itself, then its own pods.
func internalSources(is4 bool) []string {
	return []string{"-m addrtype --src-type LOCAL", "-m set --match-set " + OwnPodsSet(is4) + " src"}
}

// sourceMatches are "-s PREFIX" matches of one family, sorted, each once.
func sourceMatches(prefixes []netip.Prefix, is4 bool) []string {
	var out []string
	for _, p := range prefixes {
		if p.IsValid() && p.Addr().Is4() == is4 {
			out = append(out, "-s "+p.Masked().String())
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// writeLocalTargets spreads a match evenly over this node's endpoints (the n-th of k rules
// takes 1/(k-n) of what reaches it); false when there is none.
func writeLocalTargets(b *strings.Builder, head string, targets []string) bool {
	if len(targets) == 0 {
		return false
	}
	for i, t := range targets {
		if left := len(targets) - i; left > 1 {
			fmt.Fprintf(b, "%s -m statistic --mode random --probability %.5f -j DNAT --to-destination %s\n", head, 1/float64(left), t)
		} else {
			fmt.Fprintf(b, "%s -j DNAT --to-destination %s\n", head, t)
		}
	}
	return true
}

func localTargets(eps []LocalEndpoint, port string, is4 bool) []string {
	var out []string
	for _, e := range eps {
		if n, ok := e.Ports[port]; ok && e.Addr.Is4() == is4 {
			out = append(out, netip.AddrPortFrom(e.Addr, uint16(n)).String())
		}
	}
	sort.Strings(out)
	return out
}

func firstOfFamily(ips []netip.Addr, is4 bool) (netip.Addr, bool) {
	for _, ip := range ips {
		if ip.Is4() == is4 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}
