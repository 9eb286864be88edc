package cni

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// PodNetwork is what the controller decided for one pod interface (from the pod's
// annotations): the PodHandler plumbs exactly this.
type PodNetwork struct {
	// IPs are the pod's addresses with their subnet's prefix length (10.16.0.5/16,
	// fd00:10:16::5/64): IPv4 and/or IPv6.
	IPs []netip.Prefix
	// Gateways get the default routes, at most one per IP family; each must lie inside one
	// of IPs' subnets of its family.
	Gateways []netip.Addr
	// MAC of the pod interface; OVN's port security only lets this address through.
	MAC net.HardwareAddr
	// MTU of both veth ends; 0 means the network configuration's mtu, else DefaultMTU.
	MTU int
	// PortName is the OVN logical switch port, i.e. the OVS interface's iface-id.
	PortName string
	// Routes are extra routes inside the pod. A default route here replaces the gateway's
	// default route for its family.
	Routes []Route
	// Attachments are the pod's interfaces beyond eth0, in the order it asked for them.
	Attachments []Attachment
}

// Route is one route inside the pod.
type Route struct {
	Dst netip.Prefix
	// Gateway is the next hop; the zero Addr makes an on-link route.
	Gateway netip.Addr
}

// Networks tells the daemon what the controller decided for a pod. WaitPodNetwork blocks
// until the pod is annotated (or ctx is done); it should wrap ErrPodNotFound when the pod
// is gone (or has another uid than asked for) and ErrTryAgain for other transient states.
type Networks interface {
	WaitPodNetwork(ctx context.Context, namespace, name, uid string) (*PodNetwork, error)
}

// Validate checks n for what would fail half-way through plumbing.
func (n *PodNetwork) Validate() error {
	if n == nil {
		return fmt.Errorf("%w: no pod network", ErrInvalidConfig)
	}
	if n.PortName == "" {
		return fmt.Errorf("%w: pod network has no OVN port name", ErrInvalidConfig)
	}
	if len(n.MAC) != 6 || n.MAC[0]&1 == 1 || isZeroMAC(n.MAC) {
		return fmt.Errorf("%w: pod MAC %q is not a unicast Ethernet address", ErrInvalidConfig, n.MAC)
	}
	if n.MTU != 0 && (n.MTU < minMTU || n.MTU > maxMTU) {
		return fmt.Errorf("%w: pod MTU %d is outside %d-%d", ErrInvalidConfig, n.MTU, minMTU, maxMTU)
	}
	if len(n.IPs) == 0 {
		return fmt.Errorf("%w: pod network has no IP address", ErrInvalidConfig)
	}
	for _, ip := range n.IPs {
		if !ip.IsValid() || ip.Addr().Is4In6() || ip.Addr().IsUnspecified() {
			return fmt.Errorf("%w: invalid pod address %q", ErrInvalidConfig, ip)
		}
	}
	if err := n.validateGateways(); err != nil {
		return err
	}
	for _, r := range n.Routes {
		if !r.Dst.IsValid() || (r.Gateway.IsValid() && r.Gateway.Is4() != r.Dst.Addr().Is4()) {
			return fmt.Errorf("%w: invalid pod route to %q via %q", ErrInvalidConfig, r.Dst, r.Gateway)
		}
	}
	return nil
}

// validateGateways allows one gateway per family, inside a subnet of the pod.
func (n *PodNetwork) validateGateways() error {
	seen := map[bool]bool{}
	for _, gw := range n.Gateways {
		if !gw.IsValid() || gw.Is4In6() {
			return fmt.Errorf("%w: invalid gateway %q", ErrInvalidConfig, gw)
		}
		if seen[gw.Is4()] {
			return fmt.Errorf("%w: more than one %s gateway", ErrInvalidConfig, family(gw))
		}
		seen[gw.Is4()] = true
		if !n.onLink(gw) {
			return fmt.Errorf("%w: gateway %s is outside the pod's subnets %v", ErrInvalidConfig, gw, n.IPs)
		}
	}
	return nil
}

// onLink reports whether a lies inside one of the pod's subnets.
func (n *PodNetwork) onLink(a netip.Addr) bool {
	for _, ip := range n.IPs {
		if ip.Masked().Contains(a) {
			return true
		}
	}
	return false
}

// gatewayFor returns the gateway of ip's family, if any.
func (n *PodNetwork) gatewayFor(ip netip.Prefix) (netip.Addr, bool) {
	for _, gw := range n.Gateways {
		if gw.Is4() == ip.Addr().Is4() {
			return gw, true
		}
	}
	return netip.Addr{}, false
}

// podRoutes is every route the pod gets: the default route via each gateway (unless
// Routes has a default route of that family) followed by Routes.
func (n *PodNetwork) podRoutes() []Route {
	hasDefault := map[bool]bool{}
	for _, r := range n.Routes {
		if r.Dst.Bits() == 0 {
			hasDefault[r.Dst.Addr().Is4()] = true
		}
	}
	var routes []Route
	for _, gw := range n.Gateways {
		if hasDefault[gw.Is4()] {
			continue
		}
		dst := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		if gw.Is4() {
			dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		routes = append(routes, Route{Dst: dst, Gateway: gw})
	}
	return append(routes, n.Routes...)
}

// eth0Routes are podRoutes without the default route of a family whose default an
// attachment takes (the pod's default-route request names that attachment's gateway).
func (n *PodNetwork) eth0Routes() []Route {
	taken := map[bool]bool{}
	for _, a := range n.Attachments {
		if a.Port != nil {
			for _, gw := range a.Port.Gateways {
				taken[gw.Is4()] = true
			}
		}
	}
	var out []Route
	for _, r := range n.podRoutes() {
		if r.Dst.Bits() == 0 && taken[r.Dst.Addr().Is4()] {
			continue
		}
		out = append(out, r)
	}
	return out
}

// mtu picks the pod's MTU: the controller's, else the network configuration's, else
// DefaultMTU.
func (n *PodNetwork) mtu(confMTU int) int {
	switch {
	case n.MTU > 0:
		return n.MTU
	case confMTU > 0:
		return confMTU
	default:
		return DefaultMTU
	}
}

func isZeroMAC(mac net.HardwareAddr) bool {
	for _, b := range mac {
		if b != 0 {
			return false
		}
	}
	return true
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
