package rig

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// The rig's outside world for BGP: a top-of-rack router on the fabric running FRR (zebra and
// bgpd) that accepts a BGP session from any fabric address, and an outside host behind it on a
// network of its own (not the fabric). The outside host reaches pods and Services only through
// the routes the ToR learned from kovn-speaker: nothing else routes the clusters' ranges there.

// ToRASN is the ToR's autonomous system; SpeakerASN the one the rig's speakers use by default.
const (
	ToRASN     = 64500
	SpeakerASN = 64512
)

// SpeakerExternalIPCIDR is the range the rig's speakers may announce Service externalIPs from.
var SpeakerExternalIPCIDR = netip.MustParsePrefix("192.0.2.0/24")

// ExternalIPCIDRs are the ranges the rig's clusters honour Service externalIPs from
// (kovn-controller's and kovn-daemon's --external-ip-cidrs): the speakers' range and the
// documentation ranges the Service tests use, and the two addresses of Kubernetes' own spec
// "should be possible to connect to a service via ExternalIP when the external IP is not
// assigned to a node" (upstream-e2e's wider set). Anything else, a node's or the control
// plane's address included, is refused.
func ExternalIPCIDRs() []netip.Prefix {
	return []netip.Prefix{SpeakerExternalIPCIDR, netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:ee::/64"),
		netip.MustParsePrefix("203.0.113.250/32"), netip.MustParsePrefix("2001:db8::cb00:71fa/128")}
}

// ToRIP is the ToR's fabric address; OutsideHostIP the host behind it, on 172.31.0.0/24.
func ToRIP() netip.Addr         { return netip.AddrFrom4([4]byte{172, 30, 0, 254}) }
func ToRIP6() netip.Addr        { return v6(fabricPrefix6, 0, 0x254) }
func OutsideHostIP() netip.Addr { return netip.AddrFrom4([4]byte{172, 31, 0, 100}) }
func OutsideHostIP6() netip.Addr {
	return netip.MustParseAddr("fd00:31::100")
}

// The outside network between the ToR (its first address) and the outside host.
var (
	outsideNet  = netip.MustParsePrefix("172.31.0.0/24")
	outsideNet6 = netip.MustParsePrefix("fd00:31::/64")
)

func (c Config) ToRNS() string                 { return c.Prefix + "-tor" }
func (c Config) OutsideNS() string             { return c.Prefix + "-out" }
func (c Config) ToRIPs() []netip.Addr          { return pick(c, ToRIP(), ToRIP6()) }
func (c Config) OutsideHostIPs() []netip.Addr  { return pick(c, OutsideHostIP(), OutsideHostIP6()) }
func (c Config) OutsideNets() []netip.Prefix   { return pick(c, outsideNet, outsideNet6) }
func (c Config) torDir() string                { return filepath.Join(c.Dir, "tor") }
func (c Config) torVtyDir() string             { return filepath.Join(c.runDir(), "tor") }
func torOutsideAddr(p netip.Prefix) netip.Addr { return p.Addr().Next() }

// plugToR makes the ToR namespace on the fabric and the outside host's namespace behind it,
// joined by a veth of their own. The ToR forwards between the two (its own namespace's
// sysctls); the outside host routes everything through it.
func (r *Rig) plugToR(plug func(ns, port string, ips []netip.Addr) error) error {
	cfg, st := r.State.Config, r.State
	if err := plug(cfg.ToRNS(), "tor", cfg.ToRIPs()); err != nil {
		return err
	}
	if err := addNetNS(cfg.OutsideNS()); err != nil {
		return err
	}
	st.Namespaces = append(st.Namespaces, cfg.OutsideNS())
	tor, out := cfg.ToRNS(), cfg.OutsideNS()
	cmds := [][]string{{"link", "add", "out0", "netns", tor, "type", "veth", "peer", "name", "eth0", "netns", out}}
	for i, p := range cfg.OutsideNets() {
		torAddr := netip.PrefixFrom(torOutsideAddr(p), p.Bits()).String()
		hostAddr := netip.PrefixFrom(cfg.OutsideHostIPs()[i], p.Bits()).String()
		cmds = append(cmds, append([]string{"-n", tor}, addrAddArgs(torAddr, "out0")...),
			append([]string{"-n", out}, addrAddArgs(hostAddr, "eth0")...))
	}
	cmds = append(cmds, []string{"-n", tor, "link", "set", "out0", "up"}, []string{"-n", out, "link", "set", "eth0", "up"})
	for _, p := range cfg.OutsideNets() {
		cmds = append(cmds, []string{"-n", out, "route", "add", "default", "via", torOutsideAddr(p).String()})
	}
	for _, args := range cmds {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	// Multipath by ports too (as ToRs hash), so several connections of one client spread over
	// the speakers: every entry node gets exercised.
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1"} {
		if out, err := exec.Command("ip", "netns", "exec", tor, "sysctl", "-qw", s).CombinedOutput(); err != nil {
			return fmt.Errorf("sysctl %s in %s: %v %s", s, tor, err, out)
		}
	}
	return nil
}

// torConf is bgpd's configuration: eBGP with any fabric address (a dynamic peer group, so a
// node whose address changes is accepted again), ECMP over the speakers, graceful restart
// (helper for a restarting speaker), no import policy needed (datacenter defaults: 3/9 s timers).
func (c Config) torConf() string {
	var b strings.Builder
	b.WriteString("frr defaults datacenter\nhostname tor\n!\n")
	fmt.Fprintf(&b, "router bgp %d\n bgp router-id %s\n no bgp default ipv4-unicast\n", ToRASN, ToRIP())
	b.WriteString(" no bgp ebgp-requires-policy\n bgp bestpath as-path multipath-relax\n bgp graceful-restart\n")
	b.WriteString(" neighbor KOVN peer-group\n neighbor KOVN remote-as external\n")
	fabric := map[bool]netip.Prefix{true: netip.PrefixFrom(ToRIP(), FabricBits).Masked(), false: fabricPrefix6}
	for _, ip := range c.ToRIPs() {
		fmt.Fprintf(&b, " bgp listen range %s peer-group KOVN\n", fabric[ip.Is4()])
	}
	for _, ip := range c.ToRIPs() {
		af := map[bool]string{true: "ipv4", false: "ipv6"}[ip.Is4()]
		fmt.Fprintf(&b, " address-family %s unicast\n  neighbor KOVN activate\n  maximum-paths 16\n exit-address-family\n", af)
	}
	b.WriteString("!\n")
	return b.String()
}

// torSpec runs zebra (installs the learned routes in the ToR's kernel, which forwards) and bgpd
// with their sockets and configuration in the rig's run directory. They run as FRR's own user,
// as packaged (its privilege code insists on the frrvty group), so that user owns that
// directory; the rig's own directory may not be open to it (a test's is 0700). Their logs go
// to stdout, which the supervisor keeps in the rig directory.
func (c Config) torSpec() (SupervisorSpec, error) {
	dir, vty := c.torDir(), c.torVtyDir()
	frr, err := user.Lookup("frr")
	if err != nil {
		return SupervisorSpec{}, fmt.Errorf("FRR's user (the frr package): %w", err)
	}
	uid, _ := strconv.Atoi(frr.Uid)
	gid, _ := strconv.Atoi(frr.Gid)
	for _, d := range []string{dir, vty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return SupervisorSpec{}, err
		}
	}
	if err := os.Chown(vty, uid, gid); err != nil {
		return SupervisorSpec{}, err
	}
	confs := map[string]string{"zebra": "frr defaults datacenter\nhostname tor\n!\n", "bgpd": c.torConf()}
	zserv := filepath.Join(vty, "zserv.api")
	var steps []Step
	for _, daemon := range []string{"zebra", "bgpd"} {
		conf := filepath.Join(vty, daemon+".conf")
		if err := os.WriteFile(conf, []byte(confs[daemon]), 0o644); err != nil {
			return SupervisorSpec{}, err
		}
		if err := os.WriteFile(filepath.Join(dir, daemon+".conf"), []byte(confs[daemon]), 0o644); err != nil {
			return SupervisorSpec{}, err // a copy beside the logs, for whoever reads them
		}
		steps = append(steps, Step{Name: daemon, Daemon: true, Log: filepath.Join(dir, daemon+".log"),
			Ready: Ready{Unix: filepath.Join(vty, daemon+".vty")},
			Argv: []string{"/usr/lib/frr/" + daemon, "-f", conf, "--vty_socket", vty, "-z", zserv,
				"-i", filepath.Join(vty, daemon+".pid"), "--log", "stdout"}})
	}
	return SupervisorSpec{Name: "tor", Dir: dir, Steps: steps}, nil
}

// outsideHostSpec is the outside host's testbox (HTTP :8080, TCP :9000), as the external host's.
func (c Config) outsideHostSpec() SupervisorSpec {
	dir := filepath.Join(c.Dir, "outside")
	_ = os.MkdirAll(dir, 0o755)
	return SupervisorSpec{Name: "outside", Dir: dir, Steps: []Step{{Name: "testbox", Daemon: true,
		Log: filepath.Join(dir, "testbox.log"), Ready: Ready{TCP: hostPort(c.OutsideHostIPs()[0], 8080)},
		Argv: []string{filepath.Join(c.KovnBinDir, "kovn-testbox"), "serve", "-http", ":8080", "-tcp", ":9000"}}}}
}

// VtyshArgv is the command line running vtysh against the ToR's FRR with the given commands
// (each a -c), e.g. "show bgp ipv4 unicast json".
func (c Config) VtyshArgv(cmds ...string) []string {
	argv := []string{"ip", "netns", "exec", c.ToRNS(), "vtysh", "--vty_socket", c.torVtyDir()}
	for _, cmd := range cmds {
		argv = append(argv, "-c", cmd)
	}
	return argv
}

// outsideRouteCmds are the shell commands a node runs to reach the outside network through the
// ToR (its static routes, as a real node's uplink router would give it).
func (c Config) outsideRouteCmds() []string {
	var out []string
	for i, p := range c.OutsideNets() {
		out = append(out, fmt.Sprintf("ip route replace %s via %s", p, c.ToRIPs()[i]))
	}
	return out
}
