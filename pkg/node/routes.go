package node

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// RouteProtocol marks the routes kovn-daemon installs ("kovn" in /etc/iproute2/rt_protos if an
// admin names it), so a sync removes exactly its own stale routes and nothing else.
const RouteProtocol = 75

// SyncRoutes makes the node's routes to pod subnets exactly cidrs, each via the join gateway
// of its family on ovn0.
func SyncRoutes(link netlink.Link, cidrs []netip.Prefix, gateways []netip.Addr) error {
	want := map[string]*netlink.Route{}
	for _, c := range cidrs {
		for _, gw := range gateways {
			if gw.Is4() != c.Addr().Is4() {
				continue
			}
			dst := &net.IPNet{IP: c.Masked().Addr().AsSlice(), Mask: net.CIDRMask(c.Bits(), c.Addr().BitLen())}
			want[dst.String()] = &netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Gw: gw.AsSlice(), Protocol: RouteProtocol}
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		cur, err := netlink.RouteListFiltered(fam, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		for i := range cur {
			if cur[i].Dst == nil || want[cur[i].Dst.String()] == nil {
				if err := netlink.RouteDel(&cur[i]); err != nil {
					return fmt.Errorf("remove stale route %v: %w", cur[i].Dst, err)
				}
			}
		}
	}
	for _, r := range want {
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s via %s dev ovn0: %w", r.Dst, r.Gw, err)
		}
	}
	return nil
}

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

// EnableForwarding turns on IPv4/IPv6 forwarding in this network namespace: ovn0 routes pod
// traffic out of the node.
func EnableForwarding() error {
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if err := os.WriteFile(f, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("enable forwarding (%s): %w", f, err)
		}
	}
	return nil
}

// CNIConfigFile is the conflist kovn-daemon writes once the node is plumbed.
const CNIConfigFile = "00-kovn.conflist"

// WriteCNIConfig writes the CNI network config atomically; its presence makes kubelet report
// the node Ready, so it is written only after ovn0 and routes are up.
func WriteCNIConfig(dir, socket string, mtu int) error {
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kovn",
  "plugins": [
    {"type": "kovn-cni", "serverSocket": %q, "mtu": %d}
  ]
}
`, socket, mtu)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, CNIConfigFile)
	if cur, err := os.ReadFile(path); err == nil && string(cur) == conf {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
