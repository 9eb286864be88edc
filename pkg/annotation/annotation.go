// Package annotation defines the ovn.kovn.io/ annotations kovn reads and writes on pods,
// namespaces and nodes, and converts them to and from typed values. The controller writes the
// results (allocated addresses); users write the requests (static IP/MAC, pool, subnet); the
// node daemon reads the results to plumb the pod.
package annotation

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Prefix of every kovn annotation.
const Prefix = "ovn.kovn.io/"

// Pod annotations. Requests (set by users): IPAddress, MACAddress, IPPool, LogicalSwitch.
// Results (set by kovn-controller): IPAddress, MACAddress, CIDR, Gateway, LogicalSwitch,
// Allocated, and PortName for the daemon.
const (
	IPAddress     = Prefix + "ip_address"     // "10.16.0.5" or "10.16.0.5,fd00::5"
	MACAddress    = Prefix + "mac_address"    // "0a:58:0a:10:00:05"
	CIDR          = Prefix + "cidr"           // "10.16.0.0/16" or "10.16.0.0/16,fd00::/64"
	Gateway       = Prefix + "gateway"        // "10.16.0.1" or "10.16.0.1,fd00::1"
	LogicalSwitch = Prefix + "logical_switch" // subnet name (request or result)
	IPPool        = Prefix + "ip_pool"        // IPPool name (request)
	Allocated     = Prefix + "allocated"      // "true" once the results above are final
	PortName      = Prefix + "port_name"      // OVN logical switch port = OVS iface-id
	MTU           = Prefix + "mtu"
)

// Node annotations written by kovn-controller for the node's ovn0 on the join subnet.
const (
	JoinIP      = Prefix + "join_ip"      // "100.64.0.2"
	JoinMAC     = Prefix + "join_mac"     // "0a:58:64:40:00:02"
	JoinCIDR    = Prefix + "join_cidr"    // "100.64.0.0/16"
	JoinGateway = Prefix + "join_gateway" // "100.64.0.1"
	Chassis     = Prefix + "chassis"      // OVN chassis name (system-id)
	// ICGateway is "true" on the nodes the InterConnect makes gateways: their daemon sets
	// ovn-is-interconn, so ovn-ic publishes the chassis to the other AZs.
	ICGateway = Prefix + "ic_gateway"
	// ICTransitKeys, on a gateway node, lists the tunnel keys ovn-ic gave the cluster's transit
	// switch ports ("port=key,..."); the node's daemon copies it into Open_vSwitch external_ids,
	// which makes its ovn-controller rebuild its physical flows (see interconnect.PeerTunnelKeyID).
	ICTransitKeys = Prefix + "ic_transit_keys"
)

// ParseAddrs parses a comma-separated list of IP addresses ("10.16.0.5,fd00::5"); at most one
// per family.
func ParseAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[bool]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", f)
		}
		a = a.Unmap() // "::ffff:10.0.0.1" is IPv4: count it as such
		if seen[a.Is4()] {
			return nil, fmt.Errorf("%q: more than one address of the same family", s)
		}
		seen[a.Is4()] = true
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no IP address in %q", s)
	}
	return out, nil
}

// ParsePrefixes parses a comma-separated list of CIDRs.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CIDR in %q", s)
	}
	return out, nil
}

// ParseList splits a comma-separated list (an annotation's or a flag's), trimming spaces and
// dropping empty items.
func ParseList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ErrReservedMAC: a requested MAC is one no pod may hold (see ParseRequestedMAC).
var ErrReservedMAC = errors.New("reserved MAC address")

// ParseRequestedMAC validates a MAC a pod asks for (its mac_address annotation, an attachment
// selection's "mac"): ParseMAC, and neither all zero nor in the range kovn gives its router
// ports and floating IPs (0a:xx:..., topology.RouterMAC) other than kovn's pod range
// 0a:58:...: a pod holding its gateway's MAC would take the gateway's traffic on its switch.
func ParseRequestedMAC(s string) (string, error) {
	mac, err := ParseMAC(s)
	if err != nil {
		return "", err
	}
	hw, _ := net.ParseMAC(mac)
	switch {
	case mac == "00:00:00:00:00:00":
		return "", fmt.Errorf("%w: %q is the all-zero MAC address", ErrReservedMAC, s)
	case hw[0] == 0x0a && hw[1] != 0x58:
		return "", fmt.Errorf("%w: %s is in the range kovn keeps for router ports (0a:xx:xx:xx:xx:xx other than 0a:58:...)", ErrReservedMAC, mac)
	}
	return mac, nil
}

// ParseMAC validates a unicast MAC address and returns it in canonical lower-case form.
func ParseMAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%q is not a MAC address", s)
	}
	if hw[0]&1 == 1 {
		return "", fmt.Errorf("%q is a multicast MAC address", s)
	}
	return hw.String(), nil
}

// JoinAddrs formats addresses for an annotation.
func JoinAddrs[T fmt.Stringer](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return strings.Join(parts, ",")
}

// PodNetwork is what the controller decided for a pod, as the daemon reads it back.
type PodNetwork struct {
	IPs      []netip.Addr
	CIDRs    []netip.Prefix // subnet CIDR per address, same order
	Gateways []netip.Addr
	MAC      string
	Switch   string
	PortName string
}

// PodNetworkFrom reads the controller's results; ok is false until Allocated is "true".
func PodNetworkFrom(ann map[string]string) (pn PodNetwork, ok bool, err error) {
	if ann[Allocated] != "true" {
		return pn, false, nil
	}
	if pn.IPs, err = ParseAddrs(ann[IPAddress]); err != nil {
		return pn, false, fmt.Errorf("%s: %w", IPAddress, err)
	}
	if pn.CIDRs, err = ParsePrefixes(ann[CIDR]); err != nil {
		return pn, false, fmt.Errorf("%s: %w", CIDR, err)
	}
	if pn.Gateways, err = ParseAddrs(ann[Gateway]); err != nil {
		return pn, false, fmt.Errorf("%s: %w", Gateway, err)
	}
	if pn.MAC, err = ParseMAC(ann[MACAddress]); err != nil {
		return pn, false, fmt.Errorf("%s: %w", MACAddress, err)
	}
	if len(pn.CIDRs) != len(pn.IPs) || len(pn.Gateways) != len(pn.IPs) {
		return pn, false, fmt.Errorf("pod network annotations disagree: %d addresses, %d CIDRs, %d gateways", len(pn.IPs), len(pn.CIDRs), len(pn.Gateways))
	}
	pn.Switch, pn.PortName = ann[LogicalSwitch], ann[PortName]
	return pn, true, nil
}

// BGP on a Service asks kovn-speaker to announce its addresses: "true" (or "cluster") by its
// externalTrafficPolicy, "local" only from nodes with a ready endpoint of their own, whose
// kovn-daemon then hands traffic from outside for its ClusterIPs to those endpoints (the client
// address kept). On a pod ("true" or "local"), a host route to the pod from its own node,
// honoured only in a subnet with spec.bgpAdvertise. It chooses among addresses; it never
// supplies one.
const BGP = Prefix + "bgp"

// BGP announcement policies of a Service.
const (
	BGPCluster = "Cluster" // every speaker node announces; traffic enters anywhere
	BGPLocal   = "Local"   // only nodes with a local endpoint announce; the client address is kept
)

// BGPServicePolicy reads a Service's BGP annotation value: "" (not announced), BGPCluster or
// BGPLocal.
func BGPServicePolicy(value string, etpLocal bool) string {
	switch strings.ToLower(value) {
	case "true", "cluster":
		if etpLocal {
			return BGPLocal
		}
		return BGPCluster
	case "local":
		return BGPLocal
	}
	return ""
}

// BGPPodRequested says whether a pod's BGP annotation value asks for a host route.
func BGPPodRequested(value string) bool {
	v := strings.ToLower(value)
	return v == "true" || v == "local"
}
