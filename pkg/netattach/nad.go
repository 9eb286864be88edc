package netattach

import (
	"encoding/json"
	"fmt"
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

// DefaultDelegates are the plugins a NetworkAttachmentDefinition may name unless an admin
// narrows the list (kovn-daemon --attachment-plugins).
var DefaultDelegates = []string{"macvlan", "ipvlan", "bridge", "host-device"}

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
// delegates lists the plugin types allowed besides kovn's own.
func ParseNAD(key, config string, delegates []string) (Attachment, error) {
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
	case slices.Contains(delegates, p.Type):
		a.Kind = KindDelegate
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
			key, p.Type, strings.Join(KovnTypes, ", "), strings.Join(delegates, ", "))
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
