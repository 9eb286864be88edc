package topology

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/kovn/kovn/pkg/contract"
)

// Owner types of the shards.
const (
	OwnerVpc    = "Vpc"
	OwnerSubnet = "Subnet"
	OwnerNode   = "Node"
	OwnerPod    = "Pod"
)

// RouterPortName is the router side of the link between a VPC router and a subnet switch;
// SwitchRouterPortName is the switch side.
func RouterPortName(vpc, ls string) string       { return vpc + "-" + ls }
func SwitchRouterPortName(ls, vpc string) string { return ls + "-" + vpc }

// HealthPortName is a centralized subnet's health port: a distributed gateway port on
// HealthRouter whose gateway chassis are the subnet's gateway nodes by priority. The chassis
// OVN binds it to is the subnet's live gateway (BFD decides, as for any gateway port); no
// traffic uses it. HealthRouter hangs off the join switch, which every node has a port on, so
// OVN counts every node among the group's referencing chassis and runs BFD from each gateway
// to all of them: a surviving gateway still sees live tunnels and takes the port over (with
// BFD only between two gateways, the survivor of a pair would see none and never claim it).
func HealthPortName(subnet string) string { return healthPrefix + subnet }

const (
	HealthRouter = "kovn-gwh"
	healthPrefix = "kovn-gwh-"
	// healthLink addresses HealthRouter's port on the join switch: link-local, never a
	// destination. The health ports get /128s of healthPortNet, one per subnet by hash, so the
	// router's networks do not overlap.
	healthLink    = "169.254.0.1/32"
	healthPortNet = "fd6b:6777:6800::"
)

// healthPortNetwork is a subnet's health port address (a /128 from a hash of its name).
func healthPortNetwork(subnet string) string {
	h := sha256.Sum256([]byte(subnet))
	a := netip.MustParseAddr(healthPortNet).As16()
	copy(a[8:], h[:8])
	return netip.PrefixFrom(netip.AddrFrom16(a), 128).String()
}

// SubnetOfHealthPort returns the subnet a health port name belongs to.
func SubnetOfHealthPort(port string) (string, bool) {
	subnet, ok := strings.CutPrefix(port, healthPrefix)
	return subnet, ok && subnet != ""
}

// NodePortGroup names the port group of a node's pods. OVN derives address sets
// $<name>_ip4 / $<name>_ip6 from it; names may only hold letters, digits and underscores.
// Node names with other characters ("c1-n1", "w.example.com") get a short hash of the real
// name appended, so two nodes whose names differ only there ("a-b", "a.b") never share a group.
func NodePortGroup(node string) string {
	s, replaced := ovnIdent(node)
	if replaced {
		s += "_" + shortHash(node)
	}
	return "kovn_node_" + s
}

// RouterMAC derives a stable, locally administered MAC for a router port from its name, so a
// restarted controller computes the same address. Never 0a:58:...: that is the range pods may
// ask for (annotation.ParseRequestedMAC), and a pod holding its gateway's MAC would take the
// gateway's traffic; one name in 256 hashes there and moves to 0a:59.
func RouterMAC(portName string) string {
	h := sha256.Sum256([]byte(portName))
	if h[0] == 0x58 {
		h[0] = 0x59
	}
	return fmt.Sprintf("0a:%02x:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3], h[4])
}

// ForPod is a pod's shard: its switch port on its subnet's switch, in its node's port group.
func ForPod(p PodIn) Shard {
	addr := addressesOf(p.MAC, p.IPs)
	owner := p.Namespace + "/" + p.Name
	s := Shard{OwnerType: OwnerPod, Owner: owner, SwitchPorts: []SwitchPort{{
		Switch: p.Switch, Name: contract.PodPortName(p.Namespace, p.Name), Addresses: []string{addr}, PortSecurity: []string{addr},
		ExternalIDs: map[string]string{"pod": owner, "node": p.Node},
	}}}
	if p.Node != "" {
		s.Memberships = []Membership{{PortGroup: NodePortGroup(p.Node), Port: contract.PodPortName(p.Namespace, p.Name)}}
	}
	// Attachment ports belong to the pod's shard (one owner, gone with the pod), but not to its
	// node's port group: that group steers the pod's eth0 egress through the node.
	for _, a := range p.Attachments {
		addr := addressesOf(a.MAC, a.IPs)
		s.SwitchPorts = append(s.SwitchPorts, SwitchPort{Switch: a.Switch, Name: contract.AttachmentPortName(p.Namespace, p.Name, a.Interface),
			Addresses: []string{addr}, PortSecurity: []string{addr},
			ExternalIDs: map[string]string{"pod": owner, "node": p.Node, "interface": a.Interface}})
	}
	s.QoS = podQoS(p)
	return s
}

// PriorityPodQoS is the priority of a pod's bandwidth meters: their matches name one port
// each, so no two of kovn's rules overlap and one priority serves all.
const PriorityPodQoS = 1000

// podQoS meters the pod's traffic each way it is limited: what it sends (from-lport, its
// inport) and what it receives (to-lport, its outport), on whichever node its port is bound.
func podQoS(p PodIn) []QoS {
	port := contract.PodPortName(p.Namespace, p.Name)
	var out []QoS
	if r := p.Bandwidth.EgressKbps; r > 0 {
		out = append(out, QoS{Switch: p.Switch, Name: "egress", Direction: "from-lport", Priority: PriorityPodQoS,
			Match: fmt.Sprintf("inport == %q", port), RateKbps: r, BurstKbits: QoSBurst(r)})
	}
	if r := p.Bandwidth.IngressKbps; r > 0 {
		out = append(out, QoS{Switch: p.Switch, Name: "ingress", Direction: "to-lport", Priority: PriorityPodQoS,
			Match: fmt.Sprintf("outport == %q", port), RateKbps: r, BurstKbits: QoSBurst(r)})
	}
	return out
}

// QoSBurst is the meter's bucket for a rate: 800 ms of traffic. TCP through a policer that
// drops needs a deep bucket to average the rate: measured in the lab (kernel datapath), a
// 100 ms bucket let TCP reach only 52 % of the limit, 500 ms 97 %, 800 ms 98-101 %.
func QoSBurst(rateKbps int) int {
	return max(rateKbps*8/10, 64)
}

// ForNode is a node's shard: its ovn0 port on the join switch, its pods' port group and the
// default VPC's reroute policies that send traffic to the node's addresses and its pods'
// egress through its ovn0. join is the join subnet; without it (not valid yet) the node gets
// only its port group.
func ForNode(n NodeIn, join *SubnetIn) Shard {
	s := Shard{OwnerType: OwnerNode, Owner: n.Name, PortGroups: []PortGroup{{Name: NodePortGroup(n.Name), OwnsACLs: true}}}
	if join == nil {
		return s
	}
	s.ACLs = ownJoinACLs(n)
	if len(n.JoinIPs) > 0 && n.JoinMAC != "" {
		// No port security: ovn0 receives traffic for addresses that are not its own (pods
		// egressing through the node, replies to SNATed flows).
		s.SwitchPorts = []SwitchPort{{Switch: join.Switch, Name: contract.NodePortName(n.Name),
			Addresses: []string{addressesOf(n.JoinMAC, append(slices.Clone(n.JoinIPs), n.MasqIPs...))}, ExternalIDs: map[string]string{"node": n.Name}}}
	}
	for _, nip := range n.NodeIPs {
		if hop, ok := joinIPOf(n, nip.Is4()); ok {
			s.Policies = append(s.Policies, Policy{Router: join.Vpc, Priority: PriorityNodeReroute, Action: "reroute",
				Nexthops: []string{hop.String()}, Match: fmt.Sprintf("%s.dst == %s", family(nip), nip)})
		}
	}
	for _, v4 := range []bool{true, false} {
		if hop, ok := joinIPOf(n, v4); ok {
			f := family(hop)
			s.Policies = append(s.Policies, Policy{Router: join.Vpc, Priority: PriorityDistributedGW, Action: "reroute",
				Nexthops: []string{hop.String()}, Match: fmt.Sprintf("%s.src == $%s_%s", f, NodePortGroup(n.Name), f)})
		}
	}
	sortPolicies(s.Policies)
	return s
}

// PriorityNodeOwnJoin is the allow of a node's own join address to the pods on that node: above
// every NetworkPolicy band and a private subnet's isolation (PrioritySubnetPrivateDeny), below
// the admin's Subnet ACLs (PrioritySubnetACLBase).
const PriorityNodeOwnJoin = 1950

// ownJoinACLs let a node's own join address (ovn0: the kubelet's probes, the node's own
// connections) reach the pods on that node, whatever policy or private subnet they are under.
// Only that node's: another node's join address is judged by the policies like any source,
// so a hostNetwork pod elsewhere (or a node's masquerade) passes no NetworkPolicy by default.
// One ACL per node and family, on the node's port group (eth0 ports only).
func ownJoinACLs(n NodeIn) []ACL {
	pg := NodePortGroup(n.Name)
	var out []ACL
	for _, ip := range n.JoinIPs {
		f := family(ip)
		out = append(out, ACL{PortGroup: pg, Name: ACLName(n.Name, "own-join/"+f), Direction: "to-lport", Priority: PriorityNodeOwnJoin,
			Match: fmt.Sprintf("outport == @%s && %s.src == %s", pg, f, ip), Action: "allow-related",
			ExternalIDs: map[string]string{"node": n.Name, IPFamilyKey: f}})
	}
	return out
}

// ForSubnet is a subnet's shard: its switch (with the ACLs that isolate it when private), the
// link to its VPC's router and, in the VPC that holds the join subnet, the policies that keep
// traffic between cluster subnets routed normally and send a centralized subnet's egress to
// its active gateway. nodes holds the subnet's gateway nodes (others may be left out).
func ForSubnet(s SubnetIn, join *SubnetIn, nodes map[string]NodeIn) Shard {
	sh := Shard{OwnerType: OwnerSubnet, Owner: s.Name}
	sw := Switch{Name: s.Switch, OtherConfig: map[string]string{}}
	var nets []string
	for i, c := range s.CIDRs {
		if c.Addr().Is4() {
			sw.OtherConfig["subnet"] = c.String()
		} else {
			sw.OtherConfig["ipv6_prefix"] = c.Addr().String()
		}
		nets = append(nets, netip.PrefixFrom(s.Gateways[i], c.Bits()).String())
	}
	if len(s.ExcludeIPs) > 0 {
		sw.OtherConfig["exclude_ips"] = strings.Join(s.ExcludeIPs, " ")
	}
	if s.Underlay != nil {
		sh.Switches = []Switch{sw}
		sh.SwitchPorts = []SwitchPort{localnetPort(s)}
		sh.ACLs = adminACLs(s)
		externalGatewayPort(&sh, s, join)
		return sh
	}
	if join != nil && join.Vpc == s.Vpc {
		sw.LBGroups = []string{ClusterLBGroup} // Services are the default VPC's
	}
	if join != nil && join.Name == s.Name {
		// The join subnet's shard owns the group: it exists exactly while the VPC that
		// Services serve has its join subnet, and the join switch references it in the same
		// transaction that creates it.
		sh.LoadBalancerGroups = []LoadBalancerGroup{{Name: ClusterLBGroup}}
	}
	sh.Switches = []Switch{sw}
	sh.ACLs = append(privateACLs(s), adminACLs(s)...)
	lrp := RouterPortName(s.Vpc, s.Switch)
	sh.RouterPorts = []RouterPort{{Router: s.Vpc, Name: lrp, MAC: RouterMAC(lrp), Networks: nets,
		IPv6RAConfigs: raConfigs(s.CIDRs)}}
	sh.SwitchPorts = []SwitchPort{{Switch: s.Switch, Name: SwitchRouterPortName(s.Switch, s.Vpc), Type: "router",
		Addresses: []string{"router"}, Options: map[string]string{"router-port": lrp}}}
	if join != nil && join.Name == s.Name {
		// The health router of centralized subnets exists with the join switch it hangs off.
		link := HealthRouter + "_" + s.Switch // "_": no subnet name has one, so no health port is named so
		sh.Routers = append(sh.Routers, Router{Name: HealthRouter})
		sh.RouterPorts = append(sh.RouterPorts, RouterPort{Router: HealthRouter, Name: link, MAC: RouterMAC(link), Networks: []string{healthLink}})
		sh.SwitchPorts = append(sh.SwitchPorts, SwitchPort{Switch: s.Switch, Name: SwitchRouterPortName(s.Switch, HealthRouter), Type: "router",
			Addresses: []string{"router"}, Options: map[string]string{"router-port": link}})
	}
	if join == nil || join.Vpc != s.Vpc {
		return sh // custom VPCs: routing between their own subnets only
	}
	for _, c := range s.CIDRs {
		sh.Policies = append(sh.Policies, Policy{Router: s.Vpc, Priority: PriorityAllowCluster, Action: "allow",
			Match: fmt.Sprintf("%s.dst == %s", family(c.Addr()), c.Masked())})
	}
	if join.Name == s.Name {
		sh.Policies = append(sh.Policies, dbGuard(s)...)
	}
	if s.Centralized && len(s.GatewayNodes) > 0 {
		hp := RouterPort{Router: HealthRouter, Name: HealthPortName(s.Name), MAC: RouterMAC(HealthPortName(s.Name)),
			Networks: []string{healthPortNetwork(s.Name)}}
		for i, n := range s.GatewayNodes {
			hp.GatewayChassis = append(hp.GatewayChassis, GatewayChassis{Chassis: n, Priority: maxGatewayPriority - i})
		}
		sh.RouterPorts = append(sh.RouterPorts, hp)
	}
	if gw, ok := ActiveGateway(s, nodes); ok && s.Centralized {
		for _, c := range s.CIDRs {
			if hop, ok := joinIPOf(gw, c.Addr().Is4()); ok {
				sh.Policies = append(sh.Policies, Policy{Router: s.Vpc, Priority: PriorityCentralGateway, Action: "reroute",
					Nexthops: []string{hop.String()}, Match: fmt.Sprintf("%s.src == %s", family(c.Addr()), c.Masked()),
					ExternalIDs: map[string]string{GatewayHopsKey: gatewayHops(s, nodes, c.Addr().Is4())}})
			}
		}
	}
	sortPolicies(sh.Policies)
	return sh
}

// externalGatewayPort gives the default VPC's router a distributed gateway port on an
// underlay subnet with an external gateway: hosted by the first live node of its list (OVN
// moves it, by BFD), it answers for the subnet's floating IPs and translates them.
func externalGatewayPort(sh *Shard, s SubnetIn, join *SubnetIn) {
	eg := s.Underlay.External
	if eg == nil || join == nil {
		return
	}
	name := RouterPortName(join.Vpc, s.Switch)
	rp := RouterPort{Router: join.Vpc, Name: name, MAC: RouterMAC(name)}
	for _, a := range eg.Addrs {
		for _, c := range s.CIDRs {
			if c.Contains(a) {
				rp.Networks = append(rp.Networks, netip.PrefixFrom(a, c.Bits()).String())
			}
		}
	}
	for i, n := range eg.Nodes {
		rp.GatewayChassis = append(rp.GatewayChassis, GatewayChassis{Chassis: n, Priority: maxGatewayPriority - i})
	}
	sh.RouterPorts = append(sh.RouterPorts, rp)
	if eg.GatewayMAC != "" {
		for _, gw := range s.Gateways {
			sh.StaticMACBindings = append(sh.StaticMACBindings, StaticMACBinding{Port: name, IP: gw, MAC: eg.GatewayMAC})
		}
	}
	// nat-addresses=router: the chassis that takes the port over (or a distributed floating
	// IP's node) announces the NAT addresses with gratuitous ARPs, so the physical network
	// forgets the node that lost them at once instead of when its MAC tables age.
	sh.SwitchPorts = append(sh.SwitchPorts, SwitchPort{Switch: s.Switch, Name: SwitchRouterPortName(s.Switch, join.Vpc), Type: "router",
		Addresses: []string{"router"}, Options: map[string]string{"router-port": name, "nat-addresses": "router"}})
}

// LocalnetPortName is the port joining an underlay subnet's switch to its physical network.
// Pod ports always hold a "." (name.namespace), so no pod's port can take this name.
func LocalnetPortName(ls string) string { return "localnet-" + ls }

// localnetPort is an underlay subnet's only link out: frames to addresses the switch does not
// know (the physical gateway, hosts on the VLAN) leave through the provider bridge with the
// VLAN's tag, and pods on different nodes reach each other over the physical network, not
// over Geneve. There is deliberately no router port: the physical router is the gateway.
func localnetPort(s SubnetIn) SwitchPort {
	lp := SwitchPort{Switch: s.Switch, Name: LocalnetPortName(s.Switch), Type: "localnet", Addresses: []string{"unknown"},
		Options: map[string]string{"network_name": s.Underlay.Provider}}
	if s.Underlay.VlanID > 0 {
		tag := s.Underlay.VlanID
		lp.Tag = &tag
	}
	return lp
}

// ForVpc is a VPC's shard: its router, the default routes through the join gateway when the
// VPC holds the join subnet, and the static routes of its spec.
func ForVpc(v VpcIn, join *SubnetIn) Shard {
	sh := Shard{OwnerType: OwnerVpc, Owner: v.Name, Routers: []Router{{Name: v.Name}}}
	if join != nil && join.Vpc == v.Name {
		for i, c := range join.CIDRs {
			prefix := "0.0.0.0/0"
			if !c.Addr().Is4() {
				prefix = "::/0"
			}
			sh.Routes = append(sh.Routes, StaticRoute{Router: v.Name, Prefix: prefix, Nexthop: join.Gateways[i].String()})
		}
	}
	for _, r := range v.Routes {
		r.Router = v.Name
		sh.Routes = append(sh.Routes, r)
	}
	for _, p := range v.Policies {
		p.Router = v.Name
		sh.Policies = append(sh.Policies, p)
	}
	sortPolicies(sh.Policies)
	return sh
}

// raConfigs is the ipv6_ra_configs of a router port on cidrs: with an IPv6 network, OVN answers
// a pod's router solicitation with an advertisement naming the router's link-local address and
// the prefix. The mode is dhcpv6_stateful because addresses come from kovn's IPAM: hosts must
// not SLAAC-configure addresses of their own, which port security would drop anyway.
// Advertisements are not sent unsolicited: the CNI configures the default route, so RAs only
// serve hosts that ask, and periodic multicast to every pod would be wasted.
func raConfigs(cidrs []netip.Prefix) map[string]string {
	for _, c := range cidrs {
		if c.Addr().Is6() {
			return map[string]string{"address_mode": "dhcpv6_stateful", "send_periodic": "false"}
		}
	}
	return nil
}

func addressesOf(mac string, ips []netip.Addr) string {
	parts := []string{mac}
	for _, ip := range ips {
		parts = append(parts, ip.String())
	}
	return strings.Join(parts, " ")
}

// joinIPOf returns a node's join address of the same family as want.
func joinIPOf(n NodeIn, v4 bool) (netip.Addr, bool) {
	for _, ip := range n.JoinIPs {
		if ip.Is4() == v4 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "ip4"
	}
	return "ip6"
}

func sortPolicies(ps []Policy) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Priority != ps[j].Priority {
			return ps[i].Priority > ps[j].Priority
		}
		return ps[i].Match < ps[j].Match
	})
}

// GatewayHopsKey, on a centralized subnet's reroute policy, lists every gateway node's join
// address of the policy's family in the subnet's order ("n2=100.64.0.3,n3=100.64.0.4"), so
// that any kovn-controller replica, the leader or not, can point the policy at the node OVN
// binds the health port to from NB and SB alone (nbsync.FollowGateway): failover must not
// wait for a new leader when the node that loses its link is the leader's.
const GatewayHopsKey = "kovn.io/gateway-hops"

// gatewayHops is GatewayHopsKey's value for the family.
func gatewayHops(s SubnetIn, nodes map[string]NodeIn, v4 bool) string {
	var hops []string
	for _, name := range s.GatewayNodes {
		if hop, ok := joinIPOf(nodes[name], v4); ok {
			hops = append(hops, name+"="+hop.String())
		}
	}
	return strings.Join(hops, ",")
}

// GatewayHop is the join address GatewayHopsKey's value hops gives node, if it lists it.
func GatewayHop(hops, node string) (string, bool) {
	for _, h := range strings.Split(hops, ",") {
		if n, ip, ok := strings.Cut(h, "="); ok && n == node {
			return ip, true
		}
	}
	return "", false
}

// maxGatewayPriority is OVN's highest Gateway_Chassis priority.
const maxGatewayPriority = 32767

// ActiveGateway is the gateway node OVN bound the subnet's health port to (HoldsHealthPort),
// if it has a join address. Without that verdict (the port not bound yet, no SB connection)
// it is the first gateway node, in the subnet's order, that exists, is Ready and has a join
// address: failover then waits for the node to turn NotReady.
func ActiveGateway(s SubnetIn, nodes map[string]NodeIn) (NodeIn, bool) {
	for _, name := range s.GatewayNodes {
		if n, ok := nodes[name]; ok && n.HoldsHealthPort && len(n.JoinIPs) > 0 {
			return n, true
		}
	}
	for _, name := range s.GatewayNodes {
		if n, ok := nodes[name]; ok && n.Ready && len(n.JoinIPs) > 0 {
			return n, true
		}
	}
	return NodeIn{}, false
}
