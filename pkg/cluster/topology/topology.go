package topology

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// PodPortName is the logical switch port (and OVS iface-id) of a pod.
func PodPortName(namespace, name string) string { return name + "." + namespace }

// NodePortName is the join-switch port of a node's ovn0.
func NodePortName(node string) string { return "node-" + node }

// RouterPortName is the router side of the link between a VPC router and a subnet switch;
// SwitchRouterPortName is the switch side.
func RouterPortName(vpc, ls string) string       { return vpc + "-" + ls }
func SwitchRouterPortName(ls, vpc string) string { return ls + "-" + vpc }

// NodePortGroup names the port group of a node's pods. OVN derives address sets
// $<name>_ip4 / $<name>_ip6 from it; names may only hold letters, digits and underscores.
// Node names with other characters ("c1-n1", "w.example.com") get a short hash of the real
// name appended, so two nodes whose names differ only there ("a-b", "a.b") never share a group.
func NodePortGroup(node string) string {
	var b strings.Builder
	b.WriteString("kovn_node_")
	replaced := false
	for _, r := range node {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			replaced = true
		}
	}
	if replaced {
		h := sha256.Sum256([]byte(node))
		fmt.Fprintf(&b, "_%x", h[:4])
	}
	return b.String()
}

// RouterMAC derives a stable, locally administered MAC for a router port from its name, so a
// restarted controller computes the same address.
func RouterMAC(portName string) string {
	h := sha256.Sum256([]byte(portName))
	return fmt.Sprintf("0a:%02x:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3], h[4])
}

// For builds the desired topology. It is deterministic: equal inputs give equal outputs.
func For(in Input) Desired {
	var d Desired
	subnetsByVpc := map[string][]SubnetIn{}
	for _, s := range in.Subnets {
		subnetsByVpc[s.Vpc] = append(subnetsByVpc[s.Vpc], s)
	}
	podsBySubnet := map[string][]PodIn{}
	for _, p := range in.Pods {
		podsBySubnet[p.Subnet] = append(podsBySubnet[p.Subnet], p)
	}
	var join *SubnetIn
	for i := range in.Subnets {
		if in.Subnets[i].Name == in.JoinSubnet {
			join = &in.Subnets[i]
		}
	}
	for _, v := range in.Vpcs {
		d.Routers = append(d.Routers, router(v, subnetsByVpc[v.Name], in, join))
	}
	for _, s := range in.Subnets {
		sw := subnetSwitch(s, podsBySubnet[s.Name])
		if join != nil && s.Name == join.Name {
			sw.Ports = append(sw.Ports, nodePorts(in.Nodes)...)
		}
		sortPorts(sw.Ports)
		d.Switches = append(d.Switches, sw)
	}
	sort.Slice(d.Routers, func(i, j int) bool { return d.Routers[i].Name < d.Routers[j].Name })
	sort.Slice(d.Switches, func(i, j int) bool { return d.Switches[i].Name < d.Switches[j].Name })
	d.PortGroups = nodePortGroups(in)
	d.Frozen = append([]string(nil), in.InvalidSubnets...)
	sort.Strings(d.Frozen)
	return d
}

func subnetSwitch(s SubnetIn, pods []PodIn) Switch {
	sw := Switch{Name: s.Switch, Owner: s.Name, OtherConfig: map[string]string{}}
	for _, c := range s.CIDRs {
		if c.Addr().Is4() {
			sw.OtherConfig["subnet"] = c.String()
		} else {
			sw.OtherConfig["ipv6_prefix"] = c.Addr().String()
		}
	}
	if len(s.ExcludeIPs) > 0 {
		sw.OtherConfig["exclude_ips"] = strings.Join(s.ExcludeIPs, " ")
	}
	sw.Ports = append(sw.Ports, SwitchPort{
		Name: SwitchRouterPortName(s.Switch, s.Vpc), Type: "router", Addresses: []string{"router"},
		Options: map[string]string{"router-port": RouterPortName(s.Vpc, s.Switch)},
	})
	for _, p := range pods {
		addr := addressesOf(p.MAC, p.IPs)
		sw.Ports = append(sw.Ports, SwitchPort{
			Name: PodPortName(p.Namespace, p.Name), Addresses: []string{addr}, PortSecurity: []string{addr},
			ExternalIDs: map[string]string{"pod": p.Namespace + "/" + p.Name, "node": p.Node},
		})
	}
	return sw
}

func nodePorts(nodes []NodeIn) []SwitchPort {
	var ports []SwitchPort
	for _, n := range nodes {
		if len(n.JoinIPs) == 0 || n.JoinMAC == "" {
			continue
		}
		addr := addressesOf(n.JoinMAC, n.JoinIPs)
		// No port security: ovn0 receives traffic for addresses that are not its own (pods
		// egressing through the node, replies to SNATed flows).
		ports = append(ports, SwitchPort{Name: NodePortName(n.Name), Addresses: []string{addr},
			ExternalIDs: map[string]string{"node": n.Name}})
	}
	return ports
}

func addressesOf(mac string, ips []netip.Addr) string {
	parts := []string{mac}
	for _, ip := range ips {
		parts = append(parts, ip.String())
	}
	return strings.Join(parts, " ")
}

func sortPorts(ps []SwitchPort) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
}

func router(v VpcIn, subnets []SubnetIn, in Input, join *SubnetIn) Router {
	r := Router{Name: v.Name, Owner: v.Name}
	for _, s := range subnets {
		var nets []string
		for i, c := range s.CIDRs {
			nets = append(nets, netip.PrefixFrom(s.Gateways[i], c.Bits()).String())
		}
		name := RouterPortName(v.Name, s.Switch)
		r.Ports = append(r.Ports, RouterPort{Name: name, MAC: RouterMAC(name), Networks: nets})
	}
	sort.Slice(r.Ports, func(i, j int) bool { return r.Ports[i].Name < r.Ports[j].Name })
	if join == nil || join.Vpc != v.Name {
		return r // custom VPCs: routing between their subnets only
	}
	r.Policies = gatewayPolicies(subnets, in, join)
	for i, c := range join.CIDRs {
		prefix := "0.0.0.0/0"
		if !c.Addr().Is4() {
			prefix = "::/0"
		}
		r.Routes = append(r.Routes, StaticRoute{Prefix: prefix, Nexthop: join.Gateways[i].String()})
	}
	return r
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

func gatewayPolicies(subnets []SubnetIn, in Input, join *SubnetIn) []Policy {
	var ps []Policy
	for _, s := range subnets {
		for _, c := range s.CIDRs {
			ps = append(ps, Policy{Priority: PriorityAllowCluster, Action: "allow",
				Match: fmt.Sprintf("%s.dst == %s", family(c.Addr()), c.Masked())})
		}
	}
	nodes := map[string]NodeIn{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
		for _, nip := range n.NodeIPs {
			if hop, ok := joinIPOf(n, nip.Is4()); ok {
				ps = append(ps, Policy{Priority: PriorityNodeReroute, Action: "reroute", Nexthops: []string{hop.String()},
					Match: fmt.Sprintf("%s.dst == %s", family(nip), nip)})
			}
		}
		for _, v4 := range []bool{true, false} {
			if hop, ok := joinIPOf(n, v4); ok {
				f := map[bool]string{true: "ip4", false: "ip6"}[v4]
				ps = append(ps, Policy{Priority: PriorityDistributedGW, Action: "reroute", Nexthops: []string{hop.String()},
					Match: fmt.Sprintf("%s.src == $%s_%s", f, NodePortGroup(n.Name), f)})
			}
		}
	}
	for _, s := range subnets {
		if !s.Centralized {
			continue
		}
		gw, ok := ActiveGateway(s, nodes)
		if !ok {
			continue // no eligible gateway: traffic falls back to the pod's own node
		}
		for _, c := range s.CIDRs {
			if hop, ok := joinIPOf(gw, c.Addr().Is4()); ok {
				ps = append(ps, Policy{Priority: PriorityCentralGateway, Action: "reroute", Nexthops: []string{hop.String()},
					Match: fmt.Sprintf("%s.src == %s", family(c.Addr()), c.Masked())})
			}
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Priority != ps[j].Priority {
			return ps[i].Priority > ps[j].Priority
		}
		return ps[i].Match < ps[j].Match
	})
	return ps
}

// ActiveGateway is the first gateway node, in the subnet's order, that exists, is Ready and
// has a join address: failover moves to the next one when it is gone.
func ActiveGateway(s SubnetIn, nodes map[string]NodeIn) (NodeIn, bool) {
	for _, name := range s.GatewayNodes {
		if n, ok := nodes[name]; ok && n.Ready && len(n.JoinIPs) > 0 {
			return n, true
		}
	}
	return NodeIn{}, false
}

func nodePortGroups(in Input) []PortGroup {
	byNode := map[string][]string{}
	for _, n := range in.Nodes {
		byNode[n.Name] = nil
	}
	for _, p := range in.Pods {
		if _, ok := byNode[p.Node]; ok {
			byNode[p.Node] = append(byNode[p.Node], PodPortName(p.Namespace, p.Name))
		}
	}
	var pgs []PortGroup
	for node, ports := range byNode {
		sort.Strings(ports)
		pgs = append(pgs, PortGroup{Name: NodePortGroup(node), Owner: node, Ports: ports})
	}
	sort.Slice(pgs, func(i, j int) bool { return pgs[i].Name < pgs[j].Name })
	return pgs
}
