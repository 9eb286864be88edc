package netattach

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Kind says who makes an attachment's interface.
type Kind string

const (
	// KindKovn: a port on a kovn Subnet's logical switch, plumbed by kovn-daemon as eth0 is.
	KindKovn Kind = "kovn"
	// KindDelegate: a containernetworking plugin (macvlan, ipvlan, bridge, host-device) that
	// kovn-daemon calls; with ipam {type: kovn} its addresses come from a kovn Subnet.
	KindDelegate Kind = "delegate"
)

// KovnTypes are the plugin type names that select kovn itself: the NPWG form names the
// binary (kovn-cni), the short form the network.
var KovnTypes = []string{"kovn", "kovn-cni"}

// KovnIPAMType is the ipam type that makes a delegate take its addresses from kovn.
const KovnIPAMType = "kovn"

// DelegatePolicy is what an admin allows the delegate plugins of NetworkAttachmentDefinitions,
// which anyone who may edit in a namespace can write: the plugin types, and the node's
// interfaces they may name (a macvlan's or ipvlan's master, a host-device's device, a bridge
// plugin's bridge). Without it a namespace user moves the node's NIC into its pod (host-device)
// or sits on any of the node's networks (macvlan on any master, a bridge named like one of
// the node's). kovn-controller (before any address) and kovn-daemon (before any interface)
// apply the same policy.
type DelegatePolicy struct {
	Plugins []string
	// HostInterfaces are the node interfaces delegates may name (kovn-controller's and
	// kovn-daemon's --attachment-host-interfaces); empty: none, so only kovn's own type and
	// delegates that name no node interface are allowed.
	HostInterfaces []string
}

// DefaultDelegates are the plugin types a NetworkAttachmentDefinition may name besides kovn's,
// with no node interface allowed.
var DefaultDelegates = DelegatePolicy{Plugins: []string{"macvlan", "ipvlan", "bridge", "host-device"}}

// AllowingHostInterfaces is DefaultDelegates's plugin types on the node interfaces ifaces.
func AllowingHostInterfaces(ifaces ...string) DelegatePolicy {
	return DelegatePolicy{Plugins: DefaultDelegates.Plugins, HostInterfaces: ifaces}
}

// hostInterfaceFields are, per delegate type, the fields naming a node interface; what they
// default to when left out ("": the node's default-route interface for macvlan and ipvlan).
var hostInterfaceFields = map[string]map[string]string{
	"macvlan":     {"master": ""},
	"ipvlan":      {"master": ""},
	"bridge":      {"bridge": "cni0"},
	"host-device": {"device": "", "hwaddr": "", "kernelpath": "", "pciBusID": ""},
}

// checkHostInterfaces refuses a delegate configuration naming a node interface the policy
// does not list (or naming one by hardware address, kernel path or PCI address, which the
// policy cannot judge by name).
func (d DelegatePolicy) checkHostInterfaces(key, plugin string, raw json.RawMessage) error {
	fields := hostInterfaceFields[plugin]
	if len(fields) == 0 {
		return nil
	}
	var conf map[string]any
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fmt.Errorf("NetworkAttachmentDefinition %s: plugin configuration: %v", key, err)
	}
	named := false
	for field, def := range fields {
		v, set := conf[field].(string)
		switch {
		case !set && def == "":
			continue
		case !set:
			v = def
		case field != "device" && field != "master" && field != "bridge":
			return fmt.Errorf("NetworkAttachmentDefinition %s: %s %q: kovn allows %s devices by name only (device)", key, field, v, plugin)
		}
		named = true
		if !slices.Contains(d.HostInterfaces, v) {
			return fmt.Errorf("NetworkAttachmentDefinition %s: %s %s names the node's interface %q, which the admin has not allowed (--attachment-host-interfaces: %s)",
				key, plugin, field, v, strings.Join(d.HostInterfaces, ", "))
		}
	}
	if !named {
		return fmt.Errorf("NetworkAttachmentDefinition %s: %s names no interface (%s): it would use the node's default one, which the admin has not allowed", key, plugin, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
	}
	return nil
}

// Attachment is what a NetworkAttachmentDefinition's configuration asks for.
type Attachment struct {
	Key        string // the definition, "namespace/name"
	Kind       Kind
	Plugin     string // the plugin type (kovn, macvlan, ...)
	KovnIPAM   bool   // addresses from the kovn Subnet whose provider is Key
	CNIVersion string
	// Config is the plugin's configuration as written (a delegate is called with it).
	Config json.RawMessage
}

type pluginConf struct {
	CNIVersion string          `json:"cniVersion"`
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Provider   string          `json:"provider,omitempty"`
	IPAM       json.RawMessage `json:"ipam,omitempty"`
}

type listConf struct {
	CNIVersion string            `json:"cniVersion"`
	Name       string            `json:"name"`
	Plugins    []json.RawMessage `json:"plugins"`
}

// ParseNAD reads the spec.config of the NetworkAttachmentDefinition key ("namespace/name"): a
// single plugin's configuration, or a list with exactly one plugin (kovn runs no chains).
// delegates says which plugin types are allowed besides kovn's own and which node interfaces
// they may name.
func ParseNAD(key, config string, delegates DelegatePolicy) (Attachment, error) {
	a := Attachment{Key: key}
	raw := json.RawMessage(strings.TrimSpace(config))
	if len(raw) == 0 {
		return a, fmt.Errorf("NetworkAttachmentDefinition %s: spec.config is empty (kovn reads no CNI configuration files for attachments)", key)
	}
	var list listConf
	if err := json.Unmarshal(raw, &list); err != nil {
		return a, fmt.Errorf("NetworkAttachmentDefinition %s: spec.config is not JSON: %v", key, err)
	}
	if list.Plugins != nil {
		if len(list.Plugins) != 1 {
			return a, fmt.Errorf("NetworkAttachmentDefinition %s: a list of %d plugins; kovn runs exactly one per attachment", key, len(list.Plugins))
		}
		raw = list.Plugins[0]
	}
	var p pluginConf
	if err := json.Unmarshal(raw, &p); err != nil {
		return a, fmt.Errorf("NetworkAttachmentDefinition %s: plugin configuration: %v", key, err)
	}
	a.Plugin, a.Config, a.CNIVersion = p.Type, raw, p.CNIVersion
	if a.CNIVersion == "" {
		a.CNIVersion = list.CNIVersion
	}
	switch {
	case p.Type == "":
		return a, fmt.Errorf("NetworkAttachmentDefinition %s: the plugin has no type", key)
	case slices.Contains(KovnTypes, p.Type):
		a.Kind = KindKovn
		if p.Provider != "" && p.Provider != key {
			return a, fmt.Errorf("NetworkAttachmentDefinition %s: provider %q names another definition: a kovn attachment's provider is its own namespace/name", key, p.Provider)
		}
		if len(p.IPAM) > 0 && string(p.IPAM) != "null" && string(p.IPAM) != "{}" {
			return a, fmt.Errorf("NetworkAttachmentDefinition %s: type %s takes its addresses from the Subnet whose provider is %s; remove ipam", key, p.Type, key)
		}
		a.KovnIPAM = true
	case slices.Contains(delegates.Plugins, p.Type):
		a.Kind = KindDelegate
		if err := delegates.checkHostInterfaces(key, p.Type, raw); err != nil {
			return a, err
		}
		var ipam struct {
			Type string `json:"type"`
		}
		if len(p.IPAM) > 0 {
			if err := json.Unmarshal(p.IPAM, &ipam); err != nil {
				return a, fmt.Errorf("NetworkAttachmentDefinition %s: ipam: %v", key, err)
			}
		}
		a.KovnIPAM = ipam.Type == KovnIPAMType
	default:
		return a, fmt.Errorf("NetworkAttachmentDefinition %s: plugin type %q is not allowed here (allowed: %s, %s)",
			key, p.Type, strings.Join(KovnTypes, ", "), strings.Join(delegates.Plugins, ", "))
	}
	return a, nil
}

// DelegateConfig is the configuration kovn-daemon calls a delegate plugin with: the
// definition's own, named after the network when it has no name, and, when its addresses are
// kovn's, with ipam {type: kovn} replaced by the static IPAM plugin holding exactly the
// addresses kovn-controller allocated (the plugin never chooses one itself).
func DelegateConfig(a Attachment, addrs []netip.Prefix) ([]byte, error) {
	var conf map[string]any
	if err := json.Unmarshal(a.Config, &conf); err != nil {
		return nil, fmt.Errorf("network %s: %v", a.Key, err)
	}
	if name, _ := conf["name"].(string); name == "" {
		conf["name"] = strings.ReplaceAll(a.Key, "/", "-")
	}
	if v, _ := conf["cniVersion"].(string); v == "" {
		conf["cniVersion"] = a.CNIVersion
		if a.CNIVersion == "" {
			conf["cniVersion"] = "1.0.0"
		}
	}
	if a.KovnIPAM {
		if len(addrs) == 0 {
			return nil, fmt.Errorf("network %s: no address allocated", a.Key)
		}
		var list []map[string]string
		for _, p := range addrs {
			list = append(list, map[string]string{"address": p.String()})
		}
		conf["ipam"] = map[string]any{"type": "static", "addresses": list}
	}
	return json.Marshal(conf)
}
