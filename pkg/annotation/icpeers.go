package annotation

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Peer gateway health (interconnect). kovn-controller tells each of its gateway nodes where
// the other clusters' gateways are; the node's daemon runs a BFD session toward each and says
// which clusters it cannot reach. Both are written by kovn only (nodes are not tenant input).
const (
	// ICPeerGateways, on a gateway node, lists the other AZs' gateway tunnel addresses:
	// "az2=172.30.2.11,172.30.2.12;az3=172.30.3.11" (sorted).
	ICPeerGateways = Prefix + "ic_peer_gateways"
	// ICPeersDown, on a gateway node, lists the AZs of ICPeerGateways whose every session from
	// this node is down after one was up: "az2,az3" (sorted; absent when none).
	ICPeersDown = Prefix + "ic_peers_down"
)

// FormatPeerGateways is ICPeerGateways' value for gateways (AZ -> tunnel addresses).
func FormatPeerGateways(gateways map[string][]netip.Addr) string {
	azs := make([]string, 0, len(gateways))
	for az, addrs := range gateways {
		if len(addrs) > 0 {
			azs = append(azs, az)
		}
	}
	slices.Sort(azs)
	parts := make([]string, 0, len(azs))
	for _, az := range azs {
		addrs := slices.Clone(gateways[az])
		slices.SortFunc(addrs, netip.Addr.Compare)
		strs := make([]string, 0, len(addrs))
		for _, a := range slices.Compact(addrs) {
			strs = append(strs, a.String())
		}
		parts = append(parts, az+"="+strings.Join(strs, ","))
	}
	return strings.Join(parts, ";")
}

// ParsePeerGateways reads ICPeerGateways' value.
func ParsePeerGateways(s string) (map[string][]netip.Addr, error) {
	out := map[string][]netip.Addr{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ";") {
		az, list, ok := strings.Cut(part, "=")
		if !ok || az == "" {
			return nil, fmt.Errorf("%s: %q is not az=address[,address]", ICPeerGateways, part)
		}
		for _, f := range strings.Split(list, ",") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%s: AZ %s: %w", ICPeerGateways, az, err)
			}
			out[az] = append(out[az], a)
		}
	}
	return out, nil
}

// FormatPeersDown is ICPeersDown's value ("" for none).
func FormatPeersDown(azs []string) string {
	s := slices.Clone(azs)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// ParsePeersDown reads ICPeersDown's value.
func ParsePeersDown(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
