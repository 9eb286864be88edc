// Package netattach reads and writes what the Network Plumbing Working Group's multi-network
// specification (v1.2) puts on pods and NetworkAttachmentDefinitions: the networks a pod asks
// for (k8s.v1.cni.cncf.io/networks), the interfaces it got (k8s.v1.cni.cncf.io/network-status),
// and the CNI configuration a NetworkAttachmentDefinition carries. It is pure: kovn-controller
// (addresses) and kovn-daemon (interfaces) both call it, so they read a pod the same way.
package netattach

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kovn/kovn/pkg/annotation"
)

// Pod annotations of the NPWG specification.
const (
	// NetworksAnnotation is the pod's request: "net-a,other-ns/net-b@eth9", or a JSON list of
	// Selection objects.
	NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"
	// NetworkStatusAnnotation is written back: a JSON list of NetworkStatus, the default
	// network first.
	NetworkStatusAnnotation = "k8s.v1.cni.cncf.io/network-status"
)

// SharedNetworksAnnotation on a Namespace ("true") lets pods of every namespace use its
// NetworkAttachmentDefinitions. Only who may update Namespaces (an admin) can set it; without
// it a pod uses the definitions of its own namespace only.
const SharedNetworksAnnotation = annotation.Prefix + "shared-networks"

// CheckNamespace says whether a pod of podNS may use the selected definition: one of its own
// namespace, or of a namespace whose annotations (nsAnnotations; nil when it cannot be read)
// share its networks.
func CheckNamespace(sel Selection, podNS string, nsAnnotations map[string]string) error {
	if sel.Namespace == podNS || nsAnnotations[SharedNetworksAnnotation] == "true" {
		return nil
	}
	return fmt.Errorf("network %s: namespace %s does not share its networks (an admin annotates it %s=true)",
		sel.Key(), sel.Namespace, SharedNetworksAnnotation)
}

// maxSelections bounds one pod's attachments: each costs a port, addresses and a CNI call.
const maxSelections = 32

// Selection is one network a pod asks for (the spec's NetworkSelectionElement). Fields kovn
// does not act on (portMappings, bandwidth, cni-args) are ignored, as the spec allows.
type Selection struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Interface is the interface name in the pod; when empty, net<position> (net1 for the first).
	Interface string `json:"interface,omitempty"`
	// IPs are requested addresses, with or without a prefix length ("10.1.1.5/24" as in the
	// spec's examples, or "10.1.1.5"); at most one per family.
	IPs []string `json:"ips,omitempty"`
	// MAC is a requested unicast MAC address.
	MAC string `json:"mac,omitempty"`
	// DefaultRoute names gateway addresses the pod's default route should use on this network.
	DefaultRoute []string `json:"default-route,omitempty"`
}

// Key is the NetworkAttachmentDefinition the selection names, as "namespace/name".
func (s Selection) Key() string { return s.Namespace + "/" + s.Name }

// Addrs returns the requested addresses without their prefix lengths, at most one per family
// (annotation.ParseAddrs' rule for eth0's ip_address).
func (s Selection) Addrs() ([]netip.Addr, error) {
	if len(s.IPs) == 0 {
		return nil, nil
	}
	plain := make([]string, len(s.IPs))
	for i, ip := range s.IPs {
		plain[i] = ip
		if p, err := netip.ParsePrefix(ip); err == nil {
			plain[i] = p.Addr().String()
		} else if _, err := netip.ParseAddr(ip); err != nil {
			return nil, fmt.Errorf("network %s: ips: %q is neither an address nor an address/prefix", s.Key(), ip)
		}
	}
	out, err := annotation.ParseAddrs(strings.Join(plain, ","))
	if err != nil {
		return nil, fmt.Errorf("network %s: ips: %v", s.Key(), err)
	}
	return out, nil
}

// ParseSelections reads a pod's networks annotation: the comma-separated short form
// ("[namespace/]name[@interface]") or the JSON form. Namespaces default to the pod's and
// interface names to net1, net2, ... by position. Every element is checked; the first error
// names what is wrong, so a bad request is refused whole and no interface is made.
func ParseSelections(value, podNamespace string) ([]Selection, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, nil
	}
	var sels []Selection
	if strings.HasPrefix(value, "[") {
		dec := json.NewDecoder(strings.NewReader(value))
		if err := dec.Decode(&sels); err != nil {
			return nil, fmt.Errorf("%s: not a JSON list of network selections: %v", NetworksAnnotation, err)
		}
	} else {
		for _, f := range strings.Split(value, ",") {
			s, err := parseShort(strings.TrimSpace(f))
			if err != nil {
				return nil, err
			}
			sels = append(sels, s)
		}
	}
	if len(sels) > maxSelections {
		return nil, fmt.Errorf("%s: %d networks, at most %d", NetworksAnnotation, len(sels), maxSelections)
	}
	return sels, complete(sels, podNamespace)
}

// parseShort reads "[namespace/]name[@interface]".
func parseShort(f string) (Selection, error) {
	var s Selection
	if f == "" {
		return s, fmt.Errorf("%s: an empty network name", NetworksAnnotation)
	}
	rest, iface, hasIface := strings.Cut(f, "@")
	if hasIface {
		if iface == "" {
			return s, fmt.Errorf("%s: %q: empty interface name after @", NetworksAnnotation, f)
		}
		s.Interface = iface
	}
	if ns, name, ok := strings.Cut(rest, "/"); ok {
		s.Namespace, s.Name = ns, name
		if ns == "" {
			return s, fmt.Errorf("%s: %q: empty namespace before /", NetworksAnnotation, f)
		}
	} else {
		s.Name = rest
	}
	return s, nil
}

// complete fills defaults and validates every selection.
func complete(sels []Selection, podNamespace string) error {
	ifaces := map[string]bool{}
	for i := range sels {
		s := &sels[i]
		if s.Namespace == "" {
			s.Namespace = podNamespace
		}
		if s.Interface == "" {
			s.Interface = fmt.Sprintf("net%d", i+1)
		}
		if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
			return fmt.Errorf("%s: network name %q: %s", NetworksAnnotation, s.Name, strings.Join(errs, "; "))
		}
		if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
			return fmt.Errorf("%s: namespace %q: %s", NetworksAnnotation, s.Namespace, strings.Join(errs, "; "))
		}
		if err := validInterface(s.Interface); err != nil {
			return fmt.Errorf("%s: network %s: %v", NetworksAnnotation, s.Key(), err)
		}
		if ifaces[s.Interface] {
			return fmt.Errorf("%s: interface %s asked for twice", NetworksAnnotation, s.Interface)
		}
		ifaces[s.Interface] = true
		if _, err := s.Addrs(); err != nil {
			return fmt.Errorf("%s: %v", NetworksAnnotation, err)
		}
		if s.MAC != "" {
			mac, err := annotation.ParseRequestedMAC(s.MAC)
			if err != nil {
				return fmt.Errorf("%s: network %s: mac %q: %v", NetworksAnnotation, s.Key(), s.MAC, err)
			}
			s.MAC = mac
		}
		for _, gw := range s.DefaultRoute {
			if _, err := netip.ParseAddr(gw); err != nil {
				return fmt.Errorf("%s: network %s: default-route %q is not an address", NetworksAnnotation, s.Key(), gw)
			}
		}
	}
	return nil
}

// validInterface: a Linux interface name (1-15 bytes, no '/', ':' or whitespace) that is not
// eth0, which belongs to the default network, nor lo.
func validInterface(name string) error {
	switch {
	case len(name) == 0 || len(name) > 15:
		return fmt.Errorf("interface name %q: want 1 to 15 characters", name)
	case name == "eth0" || name == "lo" || name == "." || name == "..":
		return fmt.Errorf("interface name %q is reserved", name)
	case strings.ContainsAny(name, "/: \t\n"):
		return fmt.Errorf("interface name %q has '/', ':' or whitespace", name)
	}
	return nil
}
