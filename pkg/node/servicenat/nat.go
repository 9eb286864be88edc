package servicenat

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// natChain is kovn's own nat chain, jumped to from POSTROUTING; every sync makes it hold exactly
// the wanted rules, so it never accumulates stale ones.
const natChain = "KOVN-POSTROUTING"

// natFamily is one IP family: iptables and ip6tables keep separate tables, so each family's
// chain is written on its own.
type natFamily struct {
	name string // for errors: "IPv4"
	is4  bool
}

var natFamilies = []natFamily{{name: "IPv4", is4: true}, {name: "IPv6", is4: false}}

// SyncNAT masquerades traffic of natOutgoing subnets that leaves the cluster's own CIDRs, in
// both IP families: IPv4 through iptables, IPv6 through ip6tables, each into its own
// KOVN-POSTROUTING chain. A family with no natOutgoing CIDR still has its chain rewritten
// (emptied), so a subnet that stops NATing loses its rules. iptables is the node's packet
// filter here, driven through hostnet's Firewall. Both families are attempted even if one fails.
func SyncNAT(natCIDRs, clusterCIDRs []netip.Prefix) error {
	var errs []error
	for _, fam := range natFamilies {
		rules := natRules(fam.is4, natCIDRs, clusterCIDRs)
		if err := fam.sync(rules, hasFamily(natCIDRs, fam.is4)); err != nil {
			errs = append(errs, fmt.Errorf("%s NAT: %w", fam.name, err))
		}
	}
	return errors.Join(errs...)
}

// natRules is the iptables-restore input that rewrites natChain for one family: for each
// natOutgoing source CIDR of that family, RETURN for destinations inside the cluster's CIDRs
// of the same family (pod-to-pod and pod-to-node traffic keeps its source address), then
// MASQUERADE for everything else. Sorted, so the same input always gives the same text.
func natRules(is4 bool, natCIDRs, clusterCIDRs []netip.Prefix) string {
	srcs, dsts := ofFamily(natCIDRs, is4), ofFamily(clusterCIDRs, is4)
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n", natChain)
	for _, src := range srcs {
		for _, dst := range dsts {
			fmt.Fprintf(&b, "-A %s -s %s -d %s -j RETURN\n", natChain, src, dst)
		}
		fmt.Fprintf(&b, "-A %s -s %s -j MASQUERADE\n", natChain, src)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// ofFamily returns the masked prefixes of one family, sorted and without duplicates.
func ofFamily(ps []netip.Prefix, is4 bool) []string {
	var out []string
	for _, p := range ps {
		if p.IsValid() && p.Addr().Is4() == is4 {
			out = append(out, p.Masked().String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func hasFamily(ps []netip.Prefix, is4 bool) bool {
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.IsValid() && p.Addr().Is4() == is4 })
}

// sync makes sure natChain exists and POSTROUTING jumps to it, then makes the chain hold
// rules. A node without the family's tool is only an error if there is something to NAT in
// that family: an IPv4-only node need not have ip6tables.
func (f natFamily) sync(rules string, needed bool) error {
	fw, err := hostFirewall.Family(f.is4)
	if err != nil {
		if !needed {
			return nil
		}
		return fmt.Errorf("%s is needed to masquerade %s traffic of natOutgoing subnets: %w", hostFirewall.Tool(f.is4), f.name, err)
	}
	return applyChainsTo(fw, []chainJump{{"nat", "POSTROUTING", natChain}}, rules)
}
