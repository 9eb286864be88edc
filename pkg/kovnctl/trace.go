package kovnctl

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Packet is what a trace sends: from a pod's port to an address, a protocol and a port.
type Packet struct {
	Port    string // the source pod's OVN logical switch port (its OVS iface-id)
	Switch  string // the logical switch (the pod's Subnet)
	SrcMAC  string
	SrcIP   netip.Addr
	DstMAC  string // the destination pod's MAC on the same Subnet, else its router port's
	DstIP   netip.Addr
	Proto   string // tcp, udp or icmp
	DstPort int    // tcp and udp
}

// SrcPort is the source port every trace uses: any ephemeral port does.
const SrcPort = 40000

// Microflow is the packet as ovn-trace reads it.
func (p Packet) Microflow() string {
	ip := "ip4"
	if p.DstIP.Is6() {
		ip = "ip6"
	}
	m := []string{fmt.Sprintf("inport == %q", p.Port), "eth.src == " + p.SrcMAC, "eth.dst == " + p.DstMAC,
		ip + ".src == " + p.SrcIP.String(), ip + ".dst == " + p.DstIP.String(), "ip.ttl == 64"}
	switch p.Proto {
	case "icmp":
		if p.DstIP.Is6() {
			m = append(m, "icmp6.type == 128", "icmp6.code == 0")
		} else {
			m = append(m, "icmp4.type == 8", "icmp4.code == 0")
		}
	default:
		m = append(m, fmt.Sprintf("%s.src == %d", p.Proto, SrcPort), fmt.Sprintf("%s.dst == %d", p.Proto, p.DstPort))
	}
	return strings.Join(m, " && ")
}

// OpenFlow is the packet as ofproto/trace reads it, entering br-int on the pod's interface.
func (p Packet) OpenFlow(iface string) string {
	proto, src, dst := p.Proto, "nw_src", "nw_dst"
	if p.DstIP.Is6() {
		src, dst = "ipv6_src", "ipv6_dst"
		proto += "6"
	}
	f := []string{"in_port=" + iface, proto, "dl_src=" + p.SrcMAC, "dl_dst=" + p.DstMAC, src + "=" + p.SrcIP.String(),
		dst + "=" + p.DstIP.String(), "nw_ttl=64"}
	switch {
	case p.Proto == "icmp" && p.DstIP.Is6():
		f = append(f, "icmpv6_type=128", "icmpv6_code=0")
	case p.Proto == "icmp":
		f = append(f, "icmp_type=8", "icmp_code=0")
	default:
		f = append(f, fmt.Sprintf("tp_src=%d", SrcPort), fmt.Sprintf("tp_dst=%d", p.DstPort))
	}
	return strings.Join(f, ",")
}

// PodEnd is a pod's network as kovn-controller annotated it.
type PodEnd struct {
	Node, Port, Switch, MAC string
	IPs, Gateways           []netip.Addr
	CIDRs                   []netip.Prefix
}

// PodEndOf reads a pod's network from kovn-controller's annotations.
func PodEndOf(p *corev1.Pod) (PodEnd, error) {
	a := p.Annotations
	if a[annotation.Allocated] != "true" || a[annotation.PortName] == "" {
		return PodEnd{}, fmt.Errorf("pod %s/%s has no kovn network (not allocated yet, or host network)", p.Namespace, p.Name)
	}
	ips, err := annotation.ParseAddrs(a[annotation.IPAddress])
	if err != nil {
		return PodEnd{}, err
	}
	gws, err := annotation.ParseAddrs(a[annotation.Gateway])
	if err != nil {
		return PodEnd{}, err
	}
	var cidrs []netip.Prefix
	for _, c := range strings.Split(a[annotation.CIDR], ",") {
		if pfx, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			cidrs = append(cidrs, pfx)
		}
	}
	return PodEnd{Node: p.Spec.NodeName, Port: a[annotation.PortName], Switch: a[annotation.LogicalSwitch], MAC: a[annotation.MACAddress],
		IPs: ips, Gateways: gws, CIDRs: cidrs}, nil
}

// ofFamily returns the address of addr's family in addrs.
func ofFamily(addrs []netip.Addr, addr netip.Addr) (netip.Addr, bool) {
	for _, a := range addrs {
		if a.Is4() == addr.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// TraceResult is a trace through OVN's logical pipeline and through the node's OpenFlow tables.
type TraceResult struct {
	Packet   Packet `json:"packet"`
	Node     string `json:"node"`
	Iface    string `json:"interface"`
	Logical  string `json:"logical"`  // ovn-trace's output
	Physical string `json:"physical"` // ofproto/trace's output
	Verdict  string `json:"verdict"`
	// Service: the destination is a Service's ClusterIP, traced to this backend.
	Service string `json:"service,omitempty"`
}

// Trace traces a packet from pod to dst (an address) with proto and port: ovn-trace in OVN
// central, then ofproto/trace on the pod's node, both with the same headers.
func Trace(ctx context.Context, e *Execer, pod *corev1.Pod, dst netip.Addr, proto string, port int, detailed bool) (TraceResult, error) {
	src, err := PodEndOf(pod)
	if err != nil {
		return TraceResult{}, err
	}
	srcIP, ok := ofFamily(src.IPs, dst)
	if !ok {
		return TraceResult{}, fmt.Errorf("pod %s/%s has no address of %s's family", pod.Namespace, pod.Name, dst)
	}
	p := Packet{Port: src.Port, Switch: src.Switch, SrcMAC: src.MAC, SrcIP: srcIP, DstIP: dst, Proto: proto, DstPort: port}
	lrps := &routerPorts{e: e} // read once per trace, whatever the number of hops looked up
	if p.DstMAC, err = nextHopMAC(ctx, lrps, src, dst); err != nil {
		return TraceResult{}, err
	}
	r := TraceResult{Packet: p, Node: src.Node}
	// ovn-trace (OVN 23.03) does not apply a load balancer reached through a load balancer
	// group: the logical trace follows the Service's first ready backend, the OpenFlow trace
	// the ClusterIP itself (OVS's conntrack and select group do the load balancing there).
	logical := p
	if svc, backend, ok := serviceBackend(ctx, e, dst, proto, port); ok {
		logical.DstIP, logical.DstPort = backend.Addr(), int(backend.Port())
		if logical.DstMAC, err = nextHopMAC(ctx, lrps, src, logical.DstIP); err != nil {
			return r, err
		}
		r.Service = fmt.Sprintf("%s's ClusterIP %s: OVN's load balancer picks a backend; the logical trace follows %s", svc,
			netip.AddrPortFrom(dst, uint16(port)), backend)
	}
	format := "--summary"
	if detailed {
		format = "--detailed"
	}
	if r.Logical, err = e.OnCentral(ctx, "ovn-trace", "--db="+SBSocket, format, p.Switch, logical.Microflow()); err != nil {
		return r, err
	}
	if r.Iface, err = e.HostInterface(ctx, src.Node, src.Port); err != nil {
		return r, err
	}
	if r.Physical, err = e.OnNode(ctx, src.Node, "ovs-appctl", "-t", VswitchdCtl, "ofproto/trace", "br-int", p.OpenFlow(r.Iface)); err != nil {
		return r, err
	}
	r.Verdict = Verdict(r.Logical)
	return r, nil
}

// serviceBackend finds the Service whose ClusterIP and port dst:port are, and its first ready
// backend of dst's family (its EndpointSlices).
func serviceBackend(ctx context.Context, e *Execer, dst netip.Addr, proto string, port int) (string, netip.AddrPort, bool) {
	svcs, err := e.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", netip.AddrPort{}, false
	}
	for _, svc := range svcs.Items {
		if !slices.Contains(svc.Spec.ClusterIPs, dst.String()) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if int(sp.Port) != port || !strings.EqualFold(string(sp.Protocol), proto) {
				continue
			}
			slices, err := e.Kube.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{
				LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
			if err != nil {
				return "", netip.AddrPort{}, false
			}
			for _, sl := range slices.Items {
				for _, slp := range sl.Ports {
					if slp.Port == nil || ptr.Deref(slp.Name, "") != sp.Name {
						continue
					}
					for _, ep := range sl.Endpoints {
						if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
							continue
						}
						for _, a := range ep.Addresses {
							if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() == dst.Is4() {
								return svc.Namespace + "/" + svc.Name, netip.AddrPortFrom(ip, uint16(*slp.Port)), true
							}
						}
					}
				}
			}
		}
	}
	return "", netip.AddrPort{}, false
}

// nextHopMAC: a pod of the same Subnet is reached at its own MAC; anything else through the
// Subnet's router port.
func nextHopMAC(ctx context.Context, lrps *routerPorts, src PodEnd, dst netip.Addr) (string, error) {
	e := lrps.e
	for _, c := range src.CIDRs {
		if !c.Contains(dst) {
			continue
		}
		pods, err := podsWithIP(ctx, e, dst)
		if err != nil {
			return "", err
		}
		for i := range pods {
			if end, err := PodEndOf(&pods[i]); err == nil && end.Switch == src.Switch && slices.Contains(end.IPs, dst) {
				return end.MAC, nil
			}
		}
	}
	gw, ok := ofFamily(src.Gateways, dst)
	if !ok {
		return "", fmt.Errorf("the pod's Subnet has no gateway of %s's family", dst)
	}
	return lrps.macOf(ctx, gw)
}

// podsWithIP finds the pods holding ip: the API server selects on a pod's primary address
// (status.podIP); the other family's address is only in status.podIPs, which no field
// selector reads, so for it every pod is listed.
func podsWithIP(ctx context.Context, e *Execer, ip netip.Addr) ([]corev1.Pod, error) {
	pods, err := e.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=" + ip.String()})
	if err != nil || len(pods.Items) > 0 {
		return podItems(pods), err
	}
	pods, err = e.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	return podItems(pods), err
}

func podItems(l *corev1.PodList) []corev1.Pod {
	if l == nil {
		return nil
	}
	return l.Items
}

// routerPorts reads OVN NB's logical router ports once (the central pod looked up once).
type routerPorts struct {
	e     *Execer
	ports []nb.LogicalRouterPort
	read  bool
}

func (r *routerPorts) list(ctx context.Context) ([]nb.LogicalRouterPort, error) {
	if r.read {
		return r.ports, nil
	}
	pod, err := r.e.CentralPod(ctx)
	if err != nil {
		return nil, err
	}
	dump, err := r.e.Dump(ctx, pod, CentralContainer, "nb", NBSocket, nb.LogicalRouterPortTable)
	if err != nil {
		return nil, err
	}
	if r.ports, err = ovn.DecodeRows[nb.LogicalRouterPort](dump, nb.LogicalRouterPortTable); err != nil {
		return nil, err
	}
	r.read = true
	return r.ports, nil
}

// macOf is the MAC of the logical router port holding gw.
func (r *routerPorts) macOf(ctx context.Context, gw netip.Addr) (string, error) {
	ports, err := r.list(ctx)
	if err != nil {
		return "", err
	}
	var macs []string
	for _, p := range ports {
		for _, n := range p.Networks {
			if pfx, err := netip.ParsePrefix(n); err == nil && pfx.Addr() == gw {
				macs = append(macs, p.MAC)
			}
		}
	}
	if len(macs) != 1 {
		return "", fmt.Errorf("no single router port holds the gateway %s (%q)", gw, macs)
	}
	return macs[0], nil
}

// ovn-trace names the port a packet leaves on as `/* output to "PORT", type "" */` (summary and
// detailed formats) or `output("PORT")` (minimal); the last one is where it is delivered, the
// ones before it the hops between switches and routers.
var (
	outputRE  = regexp.MustCompile(`output to "([^"]+)"|output\("([^"]+)"\)`)
	outportRE = regexp.MustCompile(`outport = "([^"]+)"`)
)

// Verdict reads ovn-trace's output: the logical port the packet is delivered to, else where it
// was headed when the pipeline ended without delivering it (an ACL or a policy dropped it).
func Verdict(logical string) string {
	if ms := outputRE.FindAllStringSubmatch(logical, -1); len(ms) > 0 {
		last := ms[len(ms)-1]
		return "delivered to logical port " + last[1] + last[2]
	}
	if ms := outportRE.FindAllStringSubmatch(logical, -1); len(ms) > 0 {
		return "dropped on its way to logical port " + ms[len(ms)-1][1] + " (an ACL or a policy; --detailed names the stage)"
	}
	return "dropped before a logical port was chosen (--detailed names the stage)"
}
