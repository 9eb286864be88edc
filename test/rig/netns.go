package rig

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ipCmd runs iproute2. The rig is test tooling, so it may use the CLI; the product uses netlink.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func netnsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

// addNetNS creates a namespace with loopback up, refusing to reuse one that exists (it may be
// another rig's or a leftover: Down removes leftovers of this rig's prefix).
func addNetNS(name string) error {
	if netnsExists(name) {
		return fmt.Errorf("netns %s already exists (left over from an earlier rig? run kovn-rig down)", name)
	}
	if err := ipCmd("netns", "add", name); err != nil {
		return err
	}
	return ipCmd("-n", name, "link", "set", "lo", "up")
}

// createFabric makes the fabric namespace with its bridge, the rig's "physical" L2 network.
func createFabric(ns string) error {
	if err := addNetNS(ns); err != nil {
		return err
	}
	if err := ipCmd("-n", ns, "link", "add", "br-fab", "type", "bridge"); err != nil {
		return err
	}
	return ipCmd("-n", ns, "link", "set", "br-fab", "up")
}

// plugIntoFabric connects ns to the fabric bridge with a veth created directly inside the two
// namespaces (never in the host's), and gives its eth0 addrs (CIDR notation). IPv6 addresses
// skip duplicate address detection: the rig's plan makes them unique, and a tentative address
// would make the first seconds of the rig fail to bind or connect.
func plugIntoFabric(fabric, ns, port string, addrs []string) error {
	cmds := [][]string{
		{"link", "add", port, "netns", fabric, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", fabric, "link", "set", port, "master", "br-fab", "up"},
	}
	for _, a := range addrs {
		cmds = append(cmds, append([]string{"-n", ns}, addrAddArgs(a, "eth0")...))
	}
	cmds = append(cmds, []string{"-n", ns, "link", "set", "eth0", "up"})
	for _, args := range cmds {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	// Packets with partial (offloaded) checksums would reach a node's userspace OVS and be
	// dropped by the kernel behind br-phy: ping works, TCP does not. Compute checksums in software.
	for _, c := range [][]string{{"netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off"},
		{"netns", "exec", fabric, "ethtool", "-K", port, "tx", "off"}} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

// rigNamespaces lists existing namespaces that carry the rig prefix.
func rigNamespaces(prefix string) []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// addrAddArgs is the iproute2 argv adding address a (CIDR notation) to dev, with nodad for IPv6.
func addrAddArgs(a, dev string) []string {
	args := []string{"addr", "add", a, "dev", dev}
	if strings.Contains(a, ":") {
		args = append(args, "nodad")
	}
	return args
}
