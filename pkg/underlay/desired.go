package underlay

import (
	"slices"
	"sort"
	"strings"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// Want is one provider network this node takes part in, through NIC.
type Want struct {
	Provider string
	NIC      string
}

// Desired lists the provider networks node takes part in, with its NIC for each, sorted by
// provider. Networks being deleted are left out: their nodes give the NIC back.
func Desired(pns []kovnv1.ProviderNetwork, node string) []Want {
	var out []Want
	for i := range pns {
		pn := &pns[i]
		if !pn.DeletionTimestamp.IsZero() {
			continue
		}
		if nic, ok := pn.InterfaceFor(node); ok {
			out = append(out, Want{Provider: pn.Name, NIC: nic})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Provider < out[b].Provider })
	return out
}

// BridgeMappingsKey is the Open_vSwitch external_ids key ovn-controller reads the
// network-name-to-bridge map from.
const BridgeMappingsKey = "ovn-bridge-mappings"

// ParseMappings reads "net1:br1,net2:br2"; malformed entries are kept verbatim under their
// whole text so that rewriting the value does not lose what someone else wrote.
func ParseMappings(s string) map[string]string {
	out := map[string]string{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if name, br, ok := strings.Cut(e, ":"); ok && name != "" {
			out[name] = br
		} else {
			out[e] = ""
		}
	}
	return out
}

// FormatMappings writes the map back, sorted by network name.
func FormatMappings(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if m[n] == "" {
			parts = append(parts, n)
		} else {
			parts = append(parts, n+":"+m[n])
		}
	}
	return strings.Join(parts, ",")
}

// MergeMappings returns cur with kovn's providers set to their bridges and kovn's former
// providers (owned, not wanted) removed; mappings of other tools stay.
func MergeMappings(cur string, want []Want, owned []string) string {
	m := ParseMappings(cur)
	for _, p := range owned {
		delete(m, p)
	}
	for _, w := range want {
		m[w.Provider] = kovnv1.BridgeName(w.Provider)
	}
	return FormatMappings(m)
}
