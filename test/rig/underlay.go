package rig

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The rig's underlay network, for provider networks and VLANs: a second, VLAN-aware L2 network
// beside the fabric. Every node has a second NIC (eth1) on it as a trunk (VLANs 100 and 200
// tagged, the native VLAN 1 untagged), holding the node's "provider" addresses on the native
// VLAN. A physical router on the same switch has the native VLAN's gateway address and the
// gateways of the VLANs, and an external host sits on VLAN 30 behind it. Built in every rig:
// it costs three namespaces, a veth per node and one more userspace OVS.
//
// The switch is a userspace OVS bridge (br-vfab, in the fabric namespace), not a Linux bridge
// with vlan_filtering: the kernels the rig runs on may lack both bridge VLAN filtering and
// 802.1Q (this lab's 6.18 kernel is built without CONFIG_BRIDGE_VLAN_FILTERING and
// CONFIG_VLAN_8021Q: "vlan_filtering 1" is refused), and userspace OVS tags and untags in
// software, as the nodes' own OVS does. For the same reason the physical router has no VLAN subinterfaces: it has one
// port per VLAN, each an access port of the switch, named as the subinterfaces would be
// (eth0.100, eth0.200, eth0.30), beside eth0 on the native VLAN. What the nodes see on eth1 is
// what a trunk of a physical switch gives them: 802.1Q-tagged frames of VLANs 100 and 200,
// untagged frames of VLAN 1, nothing of VLAN 30.
//
// Address plan (IPv6 mirroring IPv4, decimal digits written as hex groups, as the fabric's):
//   native VLAN (provider network) 172.29.0.0/16, fd00:29::/64: node n of cluster c at
//   172.29.c.(10+n), fd00:29::c:(10+n); the physical router at 172.29.0.254, fd00:29::254.
//   VLAN v: 172.28.v.0/24, fd00:28:v::/64, gateway (the physical router) .1 / ::1.
//   The external host: 172.28.30.100, fd00:28:30::100 on VLAN 30.
// A node routes 172.28.0.0/16 and fd00:28::/32 via the physical router's native address.

// UnderlayVLANs are the VLANs every node's eth1 trunks (besides the native VLAN 1).
var UnderlayVLANs = []int{100, 200}

// UnderlayHostVLAN is the external underlay host's VLAN. No node's trunk carries it, only the
// physical router's port: the nodes reach that host routed through the router, never bridged.
const UnderlayHostVLAN = 30

// UnderlayNIC is a node's second NIC, the one on the underlay (a provider network's interface).
const UnderlayNIC = "eth1"

// vfabBridge is the underlay switch, an OVS bridge in the fabric namespace (beside br-fab);
// nativeVLAN the VLAN of untagged frames on its trunks.
const (
	vfabBridge = "br-vfab"
	nativeVLAN = 1
)

var (
	providerNet  = netip.MustParsePrefix("172.29.0.0/16")
	providerNet6 = netip.MustParsePrefix("fd00:29::/64")
	underlayNet  = netip.MustParsePrefix("172.28.0.0/16")
	underlayNet6 = netip.MustParsePrefix("fd00:28::/32")
)

// FabricVlanPort is the fabric-side end of node n of cluster cl's eth1 (a port of br-vfab in the
// fabric namespace): where a test captures what a node sends on the underlay, tags included.
func FabricVlanPort(cl, n int) string { return fmt.Sprintf("v%dn%d", cl, n) }

// PhysRouterNS is the physical router's namespace; UnderlayHostNS the external host's on VLAN 30.
func (c Config) PhysRouterNS() string   { return c.Prefix + "-prt" }
func (c Config) UnderlayHostNS() string { return c.Prefix + "-uext" }

// vlanCIDR and vlanCIDR6 are VLAN v's subnets (v < 256: it is the IPv4 plan's third byte).
func vlanCIDR(v int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 28, byte(v), 0}), 24)
}
func vlanCIDR6(v int) netip.Prefix {
	g := hexGroup(v)
	return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x28, byte(g >> 8), byte(g)}), 64)
}

// VlanCIDRs are VLAN v's subnets (family-ordered), e.g. 172.28.100.0/24 and fd00:28:100::/64.
func (c Config) VlanCIDRs(vlan int) []netip.Prefix { return pick(c, vlanCIDR(vlan), vlanCIDR6(vlan)) }

// VlanGateways are VLAN v's gateway addresses on the physical router (.1 and ::1).
func (c Config) VlanGateways(vlan int) []netip.Addr {
	var out []netip.Addr
	for _, p := range c.VlanCIDRs(vlan) {
		out = append(out, p.Addr().Next())
	}
	return out
}

// UnderlayHostIPs are the external underlay host's addresses on VLAN 30.
func (c Config) UnderlayHostIPs() []netip.Addr {
	return pick(c, netip.AddrFrom4([4]byte{172, 28, UnderlayHostVLAN, 100}), v6(vlanCIDR6(UnderlayHostVLAN), 0, 0x100))
}

// ProviderIPs are node n of cluster cl's eth1 addresses (native VLAN).
func (c Config) ProviderIPs(cl, n int) []netip.Addr {
	return pick(c, netip.AddrFrom4([4]byte{172, 29, byte(cl), byte(10 + n)}), v6(providerNet6, hexGroup(cl), hexGroup(10+n)))
}

// PhysRouterIPs are the physical router's native-VLAN addresses, the nodes' next hop to the VLANs.
func (c Config) PhysRouterIPs() []netip.Addr {
	return pick(c, netip.AddrFrom4([4]byte{172, 29, 0, 254}), v6(providerNet6, 0, 0x254))
}

// ProviderNets are the native VLAN's subnets; UnderlayRoutes the ranges a node routes through
// the physical router (every VLAN's subnet).
func (c Config) ProviderNets() []netip.Prefix   { return pick(c, providerNet, providerNet6) }
func (c Config) UnderlayRoutes() []netip.Prefix { return pick(c, underlayNet, underlayNet6) }

// prefixAddr is ip with the length of the subnet it sits in, in CIDR notation.
func prefixAddr(ip netip.Addr, subnet netip.Prefix) string {
	return netip.PrefixFrom(ip, subnet.Bits()).String()
}

// UnderlaySwitchDB is the underlay switch's OVSDB (for ovs-vsctl --db, run in the fabric
// namespace); UnderlaySwitchCtl its ovs-vswitchd's control socket (ovs-appctl -t ... fdb/show br-vfab).
func (c Config) UnderlaySwitchDB() string  { return "unix:" + filepath.Join(c.vfabRunDir(), "db.sock") }
func (c Config) UnderlaySwitchCtl() string { return filepath.Join(c.vfabRunDir(), "ovs-vswitchd.ctl") }
func (c Config) vfabRunDir() string        { return filepath.Join(c.runDir(), "vfab") }

// vfabPort is a port of the underlay switch and its VLAN settings (Port columns).
type vfabPort struct {
	name string
	vlan []string
}

// physRouterVLANs are the VLANs the physical router has a port on, besides the native VLAN.
func physRouterVLANs() []int { return append(append([]int{}, UnderlayVLANs...), UnderlayHostVLAN) }

// physRouterPort is the physical router's interface on VLAN v (its native one with v 0) and the
// switch port it is plugged into.
func physRouterPort(v int) (dev, port string) {
	if v == 0 {
		return "eth0", "vprt"
	}
	return fmt.Sprintf("eth0.%d", v), fmt.Sprintf("vprt%d", v)
}

// vfabPorts are the switch's ports: every node's trunk, the router's access ports (native VLAN
// and one per VLAN) and the external host's access port on VLAN 30.
func (c Config) vfabPorts() []vfabPort {
	trunks := []string{strconv.Itoa(nativeVLAN)}
	for _, v := range UnderlayVLANs {
		trunks = append(trunks, strconv.Itoa(v))
	}
	trunk := []string{"vlan_mode=native-untagged", fmt.Sprintf("tag=%d", nativeVLAN), "trunks=" + strings.Join(trunks, ",")}
	access := func(v int) []string { return []string{"vlan_mode=access", fmt.Sprintf("tag=%d", v)} }
	var ports []vfabPort
	for cl := 1; cl <= c.Clusters; cl++ {
		for n := 1; n <= c.Nodes; n++ {
			ports = append(ports, vfabPort{FabricVlanPort(cl, n), trunk})
		}
	}
	_, native := physRouterPort(0)
	ports = append(ports, vfabPort{native, access(nativeVLAN)})
	for _, v := range physRouterVLANs() {
		_, p := physRouterPort(v)
		ports = append(ports, vfabPort{p, access(v)})
	}
	return append(ports, vfabPort{"vuext", access(UnderlayHostVLAN)})
}

// ipCmds runs iproute2 command lines in order, stopping at the first failure.
func ipCmds(cmds [][]string) error {
	for _, args := range cmds {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	return nil
}

// nsExec runs argv inside ns (ethtool, sysctl: tools without a namespace option).
func nsExec(ns string, argv ...string) error {
	if out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns exec %s %s: %v: %s", ns, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// plugUnderlay wires the underlay: the physical router, the external host on VLAN 30 and every
// node's eth1, each by a veth to the fabric namespace whose far end the underlay switch takes
// as a port when it starts (underlaySwitchSpec). Runs after the nodes' namespaces exist.
func (r *Rig) plugUnderlay() error {
	cfg, st := r.State.Config, r.State
	for _, ns := range []string{cfg.PhysRouterNS(), cfg.UnderlayHostNS()} {
		if err := addNetNS(ns); err != nil {
			return err
		}
		st.Namespaces = append(st.Namespaces, ns)
	}
	if err := cfg.plugPhysRouter(); err != nil {
		return err
	}
	if err := cfg.plugUnderlayHost(); err != nil {
		return err
	}
	for cl := 1; cl <= cfg.Clusters; cl++ {
		for n := 1; n <= cfg.Nodes; n++ {
			if err := cfg.plugProviderNIC(cl, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// underlayVeth joins dev in ns to port in the fabric namespace (created in the two namespaces,
// never in the host's), both ends up. TX checksum offload is off on both ends: frames with
// partial checksums are dropped once userspace OVS forwards them (the switch here, a node's OVS
// once it owns eth1), as on the fabric (see plugIntoFabric).
func (c Config) underlayVeth(port, ns, dev string) error {
	fab := c.FabricNS()
	if err := ipCmds([][]string{
		{"link", "add", port, "netns", fab, "type", "veth", "peer", "name", dev, "netns", ns},
		{"-n", fab, "link", "set", port, "up"},
		{"-n", ns, "link", "set", dev, "up"},
	}); err != nil {
		return err
	}
	if err := nsExec(fab, "ethtool", "-K", port, "tx", "off"); err != nil {
		return err
	}
	return nsExec(ns, "ethtool", "-K", dev, "tx", "off")
}

// addrCmds are the iproute2 argvs giving dev in ns the addresses ips, each with the length of
// the family-matching subnet in nets (both family-ordered).
func addrCmds(ns, dev string, ips []netip.Addr, nets []netip.Prefix) [][]string {
	var cmds [][]string
	for i, ip := range ips {
		cmds = append(cmds, append([]string{"-n", ns}, addrAddArgs(prefixAddr(ip, nets[i]), dev)...))
	}
	return cmds
}

// plugProviderNIC gives node n of cluster cl its eth1 with the node's provider addresses and its
// routes to the VLANs on the native VLAN. Plain kernel configuration that nothing in the rig
// restores: a ProviderNetwork moves it to an OVS bridge and back.
func (c Config) plugProviderNIC(cl, n int) error {
	ns := c.NodeNS(cl, n)
	if err := c.underlayVeth(FabricVlanPort(cl, n), ns, UnderlayNIC); err != nil {
		return err
	}
	cmds := addrCmds(ns, UnderlayNIC, c.ProviderIPs(cl, n), c.ProviderNets())
	for i, dst := range c.UnderlayRoutes() {
		cmds = append(cmds, []string{"-n", ns, "route", "add", dst.String(), "via", c.PhysRouterIPs()[i].String(), "dev", UnderlayNIC})
	}
	return ipCmds(cmds)
}

// plugPhysRouter makes the physical router: eth0 on the native VLAN with its addresses there,
// eth0.<v> on VLAN v holding the VLAN's gateway, and forwarding on in its own namespace only.
func (c Config) plugPhysRouter() error {
	ns := c.PhysRouterNS()
	dev, port := physRouterPort(0)
	if err := c.underlayVeth(port, ns, dev); err != nil {
		return err
	}
	cmds := addrCmds(ns, dev, c.PhysRouterIPs(), c.ProviderNets())
	for _, v := range physRouterVLANs() {
		dev, port := physRouterPort(v)
		if err := c.underlayVeth(port, ns, dev); err != nil {
			return err
		}
		cmds = append(cmds, addrCmds(ns, dev, c.VlanGateways(v), c.VlanCIDRs(v))...)
	}
	if err := ipCmds(cmds); err != nil {
		return err
	}
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"} {
		if err := nsExec(ns, "sysctl", "-qw", s); err != nil {
			return err
		}
	}
	return nil
}

// plugUnderlayHost makes the external host on VLAN 30 (its switch port is an access port),
// routing everything through the VLAN's gateway on the physical router.
func (c Config) plugUnderlayHost() error {
	ns := c.UnderlayHostNS()
	if err := c.underlayVeth("vuext", ns, "eth0"); err != nil {
		return err
	}
	cmds := addrCmds(ns, "eth0", c.UnderlayHostIPs(), c.VlanCIDRs(UnderlayHostVLAN))
	for _, gw := range c.VlanGateways(UnderlayHostVLAN) {
		cmds = append(cmds, []string{"-n", ns, "route", "add", "default", "via", gw.String()})
	}
	return ipCmds(cmds)
}

// underlaySwitchSpec runs the underlay switch in the fabric namespace: ovsdb-server and a
// userspace ovs-vswitchd (started again if it exits, as the nodes' are) with br-vfab and its
// ports, in NORMAL (learning, VLAN-aware) mode. Ready once every port is attached.
func (c Config) underlaySwitchSpec() (SupervisorSpec, error) {
	dir, run := filepath.Join(c.Dir, "vfab"), c.vfabRunDir()
	if err := os.MkdirAll(run, 0o755); err != nil {
		return SupervisorSpec{}, err
	}
	confDB := filepath.Join(dir, "conf.db")
	if err := createDB(confDB, filepath.Join(ovsSchemaDir, "vswitch.ovsschema")); err != nil {
		return SupervisorSpec{}, err
	}
	env := []string{"OVS_RUNDIR=" + run, "OVS_DBDIR=" + dir}
	vsctl := []string{"ovs-vsctl", "--db=" + c.UnderlaySwitchDB(), "--timeout=30"}
	step := func(name string, argv ...string) Step {
		return Step{Name: name, Env: env, Log: filepath.Join(dir, name+".log"), Argv: argv}
	}
	db := step("ovsdb-server", "ovsdb-server", confDB, "--remote=punix:"+filepath.Join(run, "db.sock"),
		"--pidfile="+filepath.Join(run, "ovsdb-server.pid"), "--unixctl="+filepath.Join(run, "ovsdb-server.ctl"))
	db.Daemon, db.Ready = true, Ready{Unix: filepath.Join(run, "db.sock")}
	vswitchd := step("ovs-vswitchd", "ovs-vswitchd", c.UnderlaySwitchDB(), "--disable-system",
		"--pidfile="+filepath.Join(run, "ovs-vswitchd.pid"), "--unixctl="+c.UnderlaySwitchCtl())
	vswitchd.Daemon, vswitchd.Ready, vswitchd.Restart = true, Ready{Unix: c.UnderlaySwitchCtl()}, true
	bridge := append(slices.Clone(vsctl), "--", "--may-exist", "add-br", vfabBridge, "--", "set", "bridge", vfabBridge, "datapath_type=netdev")
	var wait []string
	for _, p := range c.vfabPorts() {
		bridge = append(bridge, "--", "--may-exist", "add-port", vfabBridge, p.name, "--", "set", "port", p.name)
		bridge = append(bridge, p.vlan...)
		wait = append(wait, "--", "wait-until", "interface", p.name, "ofport>0")
	}
	return SupervisorSpec{Name: "vfab", Dir: dir, Steps: []Step{db,
		step("ovs-init", append(slices.Clone(vsctl), "--no-wait", "init")...), vswitchd,
		step("br-vfab", bridge...), step("ports", append(slices.Clone(vsctl), wait...)...)}}, nil
}

// underlayHostSpec is the external underlay host's testbox (HTTP :8080, TCP :9000), as the
// outside host's: what a VLAN's pods reach on the physical network.
func (c Config) underlayHostSpec() SupervisorSpec {
	dir := filepath.Join(c.Dir, "uext")
	_ = os.MkdirAll(dir, 0o755)
	return SupervisorSpec{Name: "uext", Dir: dir, Steps: []Step{{Name: "testbox", Daemon: true,
		Log: filepath.Join(dir, "testbox.log"), Ready: Ready{TCP: hostPort(c.UnderlayHostIPs()[0], 8080)},
		Argv: []string{filepath.Join(c.KovnBinDir, "kovn-testbox"), "serve", "-http", ":8080", "-tcp", ":9000"}}}}
}
