package servicenat

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// hostPorts (containers[].ports[].hostPort) are translated by kovn-daemon in the node's own
// packet filter, like NodePorts: kovn replaces kube-proxy and its CNI chain has no portmap
// plugin. The rules are derived from the Pod objects of this node and the addresses the
// controller recorded for them (IP objects), never from CNI ADD: a restarted daemon rebuilds
// them from the API, and a deleted pod's rules go with the pod (see hostport_controller.go).
//
// Connections are DNATed to podIP:containerPort and always masqueraded, into the overlay to the
// node's masquerade address (see masqTarget: the pod's NetworkPolicy judges that address, not
// the node's). Without it the pod's reply would not come back through this node in
// several cases, since OVN routes replies by destination: to a pod client (routed pod to pod
// inside OVN), to another node's address (rerouted to that node's ovn0), and to anyone when
// the pod's subnet egresses through a centralized gateway on another node. Only an external
// client of a distributed subnet's pod would be safe; telling it apart needs every node's
// addresses, which the daemon does not watch (it caches only its own Node). The price is the
// one NodePort ETP=Cluster pays: the pod sees the node's masquerade address, not the client's.
const (
	hostPortChain     = "KOVN-HOSTPORTS"     // nat PREROUTING and OUTPUT
	hostPortMasqChain = "KOVN-HOSTPORT-MASQ" // nat POSTROUTING
	// hostPortMark is kovn's one "masquerade me" bit, shared with NodePorts on purpose: either
	// masquerade chain handles the other's packets identically, so neither depends on the
	// other having been written.
	hostPortMark = nodePortMark
)

// HostPortMapping is one container port published on the node.
type HostPortMapping struct {
	Key      string // namespace/name of the pod, for rule comments
	Protocol string // TCP | UDP | SCTP
	// HostIP: the zero Addr is every local address of both families (hostIP "" or 0.0.0.0),
	// "::" every local IPv6 address, anything else that address only.
	HostIP        netip.Addr
	HostPort      int32
	ContainerPort int32
	PodIPs        []netip.Addr
}

// HostPortRules is the iptables-restore input rewriting both hostPort chains for one family.
// Mappings on a specific address come before wildcard ones (the more specific wins, as with a
// socket bound to one address next to one bound to all), then by protocol, port and pod, so
// the same input always gives the same text (an unchanged node causes no rewrite). Two pods
// on one hostIP/hostPort/protocol cannot both be scheduled to a node; if it happens anyway
// (static pods), the first rule wins.
func HostPortRules(is4 bool, maps []HostPortMapping, masqAddrs []netip.Addr) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n:%s - [0:0]\n", hostPortChain, hostPortMasqChain)
	masq, _ := firstOfFamily(masqAddrs, is4)
	b.WriteString(markedMasq(hostPortMasqChain, masq))
	sorted := slices.Clone(maps)
	slices.SortStableFunc(sorted, func(a, b HostPortMapping) int {
		return cmp.Or(cmp.Compare(btoi(isWildcard(a.HostIP)), btoi(isWildcard(b.HostIP))), a.HostIP.Compare(b.HostIP),
			cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.HostPort, b.HostPort), cmp.Compare(a.Key, b.Key))
	})
	for _, m := range sorted {
		dst, ok := hostPortDst(is4, m.HostIP)
		podIP, hasIP := firstOfFamily(m.PodIPs, is4)
		if !ok || !hasIP || m.HostPort <= 0 || m.ContainerPort <= 0 {
			continue
		}
		proto := strings.ToLower(m.Protocol)
		head := fmt.Sprintf("-A %s %s -m addrtype --dst-type LOCAL -p %s -m %s --dport %d -m comment --comment %q",
			hostPortChain, dst, proto, proto, m.HostPort, fmt.Sprintf("%s:%d/%s", m.Key, m.ContainerPort, m.Protocol))
		fmt.Fprintf(&b, "%s -j MARK --set-xmark %s\n", head, hostPortMark)
		fmt.Fprintf(&b, "%s -j DNAT --to-destination %s\n", head, netip.AddrPortFrom(podIP, uint16(m.ContainerPort)))
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// hostPortDst is the destination match of a mapping in one family; false: not this family.
// Every match is also limited to the node's own addresses (--dst-type LOCAL, added by the
// caller): a hostIP naming someone else's address (a pod's, a ClusterIP) must not capture the
// node's own traffic to it, such as kubelet's probes. Wildcards leave out loopback: a DNAT
// from 127.0.0.1 towards ovn0 would be dropped as martian, while a local listener on
// localhost:hostPort keeps working.
func hostPortDst(is4 bool, hostIP netip.Addr) (string, bool) {
	switch {
	case hostIP.IsValid() && hostIP.Is4() != is4:
		return "", false
	case !isWildcard(hostIP):
		return "-d " + netip.PrefixFrom(hostIP, hostIP.BitLen()).String(), true
	case is4:
		return "! -d 127.0.0.0/8", true
	default:
		return "! -d ::1/128", true
	}
}

func isWildcard(a netip.Addr) bool { return !a.IsValid() || a.IsUnspecified() }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
