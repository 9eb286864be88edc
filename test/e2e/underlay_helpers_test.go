package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// waitEth1 polls every 50 ms (up to 20 s) until done holds for the joining nodes' eth1 state.
func (l *underlayLab) waitEth1(t *testing.T, done func(n int, st string) bool) time.Duration {
	start := time.Now()
	for time.Since(start) < 20*time.Second {
		all := true
		for _, n := range l.nodes {
			all = all && done(n, l.eth1State(t, n))
		}
		if all {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// eth1State is what a node has on eth1 and its provider bridge: addresses (global) and routes
// through them, one per line, "dev addr" and "route" lines sorted.
func (l *underlayLab) eth1State(t *testing.T, n int) string {
	var lines []string
	for _, dev := range []string{rig.UnderlayNIC, "br-" + l.provider} {
		out, err := exec.Command("ip", "-n", l.cfg.NodeNS(1, n), "-o", "addr", "show", "dev", dev, "scope", "global").CombinedOutput()
		if err != nil {
			continue // no bridge
		}
		for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if fs := strings.Fields(f); len(fs) >= 4 {
				lines = append(lines, dev+" "+fs[3])
			}
		}
		for _, fam := range []string{"-4", "-6"} {
			out, _ := exec.Command("ip", "-n", l.cfg.NodeNS(1, n), fam, "route", "show", "dev", dev).CombinedOutput()
			for _, r := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.Contains(r, " via ") {
					lines = append(lines, strings.Join(strings.Fields(r)[:3], " ")+" dev "+dev)
				}
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// routerForwarding turns forwarding in the physical router's namespace on or off.
func (l *underlayLab) routerForwarding(t *testing.T, on bool) {
	v := map[bool]string{true: "1", false: "0"}[on]
	for _, s := range []string{"net.ipv4.ip_forward=" + v, "net.ipv6.conf.all.forwarding=" + v} {
		if out, err := exec.Command("ip", "netns", "exec", l.cfg.PhysRouterNS(), "sysctl", "-qw", s).CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s in the physical router: %v %s", s, err, out)
		}
	}
}

// capture runs tcpdump (link headers, so 802.1Q tags show) on iface in ns around during.
func capture(t *testing.T, ns, iface, filter string, during func()) string {
	t.Helper()
	argv := []string{"netns", "exec", ns, "tcpdump", "-l", "-nn", "-e", "-i", iface}
	if filter != "" {
		argv = append(argv, strings.Fields(filter)...)
	}
	cmd := exec.Command("ip", argv...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = eventually(5*time.Second, func() error {
		if !strings.Contains(errOut.String(), "listening on") {
			return fmt.Errorf("tcpdump not listening yet")
		}
		return nil
	})
	during()
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Signal(os.Interrupt) // the pid we started
	_ = cmd.Wait()
	return out.String()
}

// underlayHostExec runs the testbox on the external host of VLAN 30.
func underlayHostExec(cfg rig.Config, args ...string) (string, error) {
	return nsTestbox(cfg, cfg.UnderlayHostNS(), args...)
}

// underlayHostStream probes ip every 100 ms from the external host, doing event 2 s in.
func underlayHostStream(cfg rig.Config, ip string, count int, event func()) (lost int, outage string, err error) {
	return nsStream(cfg, cfg.UnderlayHostNS(), ip, count, 2*time.Second, event)
}

func nodeExecOut(t *testing.T, cfg rig.Config, n int, argv ...string) string {
	out, _ := exec.Command("ip", append([]string{"netns", "exec", cfg.NodeNS(1, n)}, argv...)...).CombinedOutput()
	return string(out)
}

func joinAddrs(as []netip.Addr) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// outageText is parseStream's outage for a log line.
func outageText(outage string) string { return "longest outage " + outage }

// excludedDiag is what a failed answer from node n's eth1 (given back by an exclusion) leaves
// to read: the node's eth1 as the kernel has it (flags, addresses, the route back, neighbours),
// the physical router's neighbours, the underlay switch's MAC table, and one echo from the
// external host captured at the switch's port of the node and on the node's eth1.
func (l *underlayLab) excludedDiag(t *testing.T, n int, ip netip.Addr) string {
	var b strings.Builder
	back := l.cfg.UnderlayHostIPs()[0]
	if ip.Is6() {
		back = l.cfg.UnderlayHostIPs()[len(l.cfg.UnderlayHostIPs())-1]
	}
	for _, argv := range [][]string{
		{"ip", "-d", "-s", "link", "show", "dev", rig.UnderlayNIC},
		{"ip", "addr", "show", "dev", rig.UnderlayNIC},
		{"ip", "route", "get", back.String()},
		{"ip", "neigh", "show"},
		{"ip", "link", "show"},
	} {
		fmt.Fprintf(&b, "c1-n%d$ %s\n%s", n, strings.Join(argv, " "), nodeExecOut(t, l.cfg, n, argv...))
	}
	out, _ := exec.Command("ip", "-n", l.cfg.PhysRouterNS(), "neigh", "show").CombinedOutput()
	fmt.Fprintf(&b, "physical router$ ip neigh show\n%s", out)
	out, _ = exec.Command("ip", "netns", "exec", l.cfg.FabricNS(), "ovs-appctl", "-t", l.cfg.UnderlaySwitchCtl(), "fdb/show", "br-vfab").CombinedOutput()
	fmt.Fprintf(&b, "underlay switch$ fdb/show br-vfab\n%s", out)
	ping := func() { _, _ = underlayHostExec(l.cfg, "ping", "-c", "2", "-W", "1s", ip.String()) }
	fmt.Fprintf(&b, "switch port %s during 2 echoes:\n%s", rig.FabricVlanPort(1, n), capture(t, l.cfg.FabricNS(), rig.FabricVlanPort(1, n), "", ping))
	fmt.Fprintf(&b, "c1-n%d's %s during 2 echoes:\n%s", n, rig.UnderlayNIC, capture(t, l.cfg.NodeNS(1, n), rig.UnderlayNIC, "", ping))
	return b.String()
}
