package node

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
)

// natChain is kovn's own nat chain, jumped to from POSTROUTING; it is rewritten whole on every
// sync, so it never accumulates stale rules.
const natChain = "KOVN-POSTROUTING"

// SyncNAT masquerades traffic of natOutgoing subnets that leaves the cluster's own CIDRs.
// IPv4 only so far. iptables is the node's packet filter here (an exec, not an OVSDB CLI).
func SyncNAT(natCIDRs, clusterCIDRs []netip.Prefix) error {
	var rules bytes.Buffer
	sort.Slice(natCIDRs, func(i, j int) bool { return natCIDRs[i].String() < natCIDRs[j].String() })
	fmt.Fprintf(&rules, "*nat\n:%s - [0:0]\n", natChain)
	for _, src := range natCIDRs {
		if !src.Addr().Is4() {
			continue
		}
		for _, dst := range clusterCIDRs {
			if dst.Addr().Is4() {
				fmt.Fprintf(&rules, "-A %s -s %s -d %s -j RETURN\n", natChain, src, dst)
			}
		}
		fmt.Fprintf(&rules, "-A %s -s %s -j MASQUERADE\n", natChain, src)
	}
	rules.WriteString("COMMIT\n")
	if out, err := exec.Command("iptables", "-t", "nat", "-N", natChain).CombinedOutput(); err != nil && !strings.Contains(string(out), "exists") {
		return fmt.Errorf("iptables -N %s: %v: %s", natChain, err, out)
	}
	if exec.Command("iptables", "-t", "nat", "-C", "POSTROUTING", "-j", natChain).Run() != nil {
		if out, err := exec.Command("iptables", "-t", "nat", "-I", "POSTROUTING", "-j", natChain).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables jump to %s: %v: %s", natChain, err, out)
		}
	}
	cmd := exec.Command("iptables-restore", "--noflush")
	cmd.Stdin = &rules
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s", err, out)
	}
	return nil
}
