package cni

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"regexp"
)

// Attachment is one pod interface beyond eth0 (k8s.v1.cni.cncf.io/networks), as kovn decided
// it: either a kovn port, plumbed as eth0 is, or a delegate plugin that kovn-daemon calls.
type Attachment struct {
	// IfName is the interface inside the pod (net1, or what the pod asked for).
	IfName string
	// Network is the NetworkAttachmentDefinition, "namespace/name".
	Network string
	// Port is set for a kovn attachment: a veth to a port on the Subnet's switch. Its
	// Gateways give default routes only where the pod asked for them (default-route).
	Port *PodNetwork
	// Plugin is a delegate's type (macvlan, ipvlan, ...); Config the configuration it is
	// called with (kovn's addresses already in it as static IPAM).
	Plugin string
	Config json.RawMessage
	// MAC is a delegate's requested MAC, passed as runtimeConfig.mac; empty lets it choose.
	MAC net.HardwareAddr
}

// pluginName is a plugin type a daemon may run: a file name in the CNI bin directory.
var pluginName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// validateAttachments checks pn's attachments for what would fail half-way through plumbing.
func (n *PodNetwork) validateAttachments(eth0 string) error {
	seen := map[string]bool{eth0: true, "lo": true}
	for _, a := range n.Attachments {
		if a.IfName == "" || len(a.IfName) > 15 || seen[a.IfName] {
			return fmt.Errorf("%w: attachment %s: interface name %q is empty, too long or used twice", ErrInvalidConfig, a.Network, a.IfName)
		}
		seen[a.IfName] = true
		switch {
		case a.Port != nil && a.Plugin != "":
			return fmt.Errorf("%w: attachment %s (%s) is both a kovn port and a delegate", ErrInvalidConfig, a.Network, a.IfName)
		case a.Port != nil:
			if err := a.Port.Validate(); err != nil {
				return fmt.Errorf("attachment %s (%s): %w", a.Network, a.IfName, err)
			}
		case !pluginName.MatchString(a.Plugin):
			return fmt.Errorf("%w: attachment %s (%s): plugin %q is not a plugin name", ErrInvalidConfig, a.Network, a.IfName, a.Plugin)
		case !json.Valid(a.Config):
			return fmt.Errorf("%w: attachment %s (%s): the delegate's configuration is not JSON", ErrInvalidConfig, a.Network, a.IfName)
		}
	}
	return nil
}

// statusIPs are addresses without their prefix length, as network-status lists them.
func statusIPs(ps []netip.Prefix) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Addr().String())
	}
	return out
}
