package rig

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// NodeDiagnostics is a short picture of node n's fabric side, for a failed test's output:
// addresses, routes and neighbours of both families, and what br-phy's userspace datapath has
// learned (MACs, tunnel neighbours). A rig's logs vanish with a CI clone; this stays in the
// test output, so a path that broke (a neighbour that went FAILED, a MAC learned on the wrong
// port) can be read from CI.
func (c Config) NodeDiagnostics(cl, n int) string {
	ns := c.NodeNS(cl, n)
	ctl := c.vswitchdCtl(cl, n)
	return runAll([][]string{
		{"ip", "-n", ns, "-br", "addr"},
		{"ip", "-n", ns, "route"},
		{"ip", "-n", ns, "-6", "route"},
		{"ip", "-n", ns, "neigh"},
		{"ip", "-n", ns, "-6", "neigh"},
		{"ovs-appctl", "-t", ctl, "fdb/show", "br-phy"},
		{"ovs-appctl", "-t", ctl, "tnl/neigh/show"},
	})
}

// runAll runs each command and returns "$ command" and its output (and error) for each.
func runAll(argvs [][]string) string {
	var b strings.Builder
	for _, argv := range argvs {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(argv, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

// OVSDBSocket is the node's Open_vSwitch database socket, for ovs-vsctl --db unix:<it>.
func (c Config) OVSDBSocket(cl, n int) string {
	return filepath.Join(c.nodeOVSRunDir(cl, n), "db.sock")
}

// nodeOVSRunDir is node n's OVS run directory as the host sees it: the rig's own, or with the
// chart the node's hostPath (chartNodeBinds).
func (c Config) nodeOVSRunDir(cl, n int) string {
	if c.Chart() {
		return filepath.Join(c.NodeDir(cl, n), "host", "ovs-run")
	}
	return filepath.Join(c.runDir(), NodeName(cl, n), "ovs")
}

// nodeOVNRunDir is node n's OVN run directory (ovn-controller's pidfile and control socket).
func (c Config) nodeOVNRunDir(cl, n int) string {
	if c.Chart() {
		return filepath.Join(c.NodeDir(cl, n), "host", "ovn-run")
	}
	return filepath.Join(c.runDir(), NodeName(cl, n), "ovn")
}

// vswitchdCtl is node n's ovs-vswitchd control socket, for ovs-appctl -t.
func (c Config) vswitchdCtl(cl, n int) string {
	return filepath.Join(c.nodeOVSRunDir(cl, n), "ovs-vswitchd.ctl")
}

// OVNControllerCtl is node n's ovn-controller control socket ("" if it runs none): it names
// itself ovn-controller.<pid>.ctl in the node's OVN run directory.
func (c Config) OVNControllerCtl(cl, n int) string {
	m, _ := filepath.Glob(filepath.Join(c.nodeOVNRunDir(cl, n), "ovn-controller.*.ctl"))
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// DatapathDiagnostics is what node n's userspace datapath does with tunnel traffic now: the
// tunnel neighbours and routes it resolved, and every datapath flow with its packet counts (a
// drop that keeps counting, or a tunnel push to a stale MAC, shows here).
func (c Config) DatapathDiagnostics(cl, n int) string {
	ctl := c.vswitchdCtl(cl, n)
	return runAll([][]string{
		{"ovs-appctl", "-t", ctl, "tnl/neigh/show"},
		{"ovs-appctl", "-t", ctl, "ovs/route/show"},
		{"ovs-appctl", "-t", ctl, "dpctl/dump-flows"},
	})
}

// PurgeDatapathFlows drops every datapath flow of node n (ovs-appctl revalidator/purge), so the
// next packets are translated afresh from the OpenFlow tables.
func (c Config) PurgeDatapathFlows(cl, n int) error {
	out, err := exec.Command("ovs-appctl", "-t", c.vswitchdCtl(cl, n), "revalidator/purge").CombinedOutput()
	if err != nil {
		return fmt.Errorf("revalidator/purge on %s: %v %s", NodeName(cl, n), err, out)
	}
	return nil
}

// RecomputeOVNController asks node n's ovn-controller for a full recompute of its flows.
func (c Config) RecomputeOVNController(cl, n int) error {
	ctl := c.OVNControllerCtl(cl, n)
	if ctl == "" {
		return fmt.Errorf("%s: no ovn-controller control socket", NodeName(cl, n))
	}
	out, err := exec.Command("ovn-appctl", "-t", ctl, "recompute").CombinedOutput()
	if err != nil {
		return fmt.Errorf("recompute on %s: %v %s", NodeName(cl, n), err, out)
	}
	return nil
}

// FlushTunnelNeighbours empties node n's userspace tunnel neighbour cache (tnl/neigh/flush),
// as its aging would.
func (c Config) FlushTunnelNeighbours(cl, n int) error {
	out, err := exec.Command("ovs-appctl", "-t", c.vswitchdCtl(cl, n), "tnl/neigh/flush").CombinedOutput()
	if err != nil {
		return fmt.Errorf("tnl/neigh/flush on %s: %v %s", NodeName(cl, n), err, out)
	}
	return nil
}

// DatapathPortChanges is how many ports node n's ovs-vswitchd has added to and deleted from its
// userspace datapath since it started (coverage counters dpif_port_add + dpif_port_del). In the
// rig's userspace datapath (OVS 3.1, netdev) each such change makes ovs-vswitchd re-read its
// ports, and a tunnelled packet crossing the node in that instant can be dropped (README: about
// 1 in 20 changes with a 20 ms probe stream; packets between ports of one node were never hit).
// A test that allows no loss reads this before and after its stream to tell that artifact from
// a kovn fault.
func (c Config) DatapathPortChanges(cl, n int) (int, error) {
	total := 0
	for _, counter := range []string{"dpif_port_add", "dpif_port_del"} {
		out, err := exec.Command("ovs-appctl", "-t", c.vswitchdCtl(cl, n), "coverage/read-counter", counter).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("coverage/read-counter %s on %s: %v %s", counter, NodeName(cl, n), err, out)
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			return 0, fmt.Errorf("coverage/read-counter %s on %s: %q", counter, NodeName(cl, n), out)
		}
		total += v
	}
	return total, nil
}

// DatapathPortChangesByNode is DatapathPortChanges of every node of every cluster, by node
// name. A node whose ovs-vswitchd does not answer is left out: a check that compares two
// readings sees it neither before nor after.
func (c Config) DatapathPortChangesByNode() map[string]int {
	out := map[string]int{}
	for cl := 1; cl <= c.Clusters; cl++ {
		for n := 1; n <= c.Nodes; n++ {
			if v, err := c.DatapathPortChanges(cl, n); err == nil {
				out[NodeName(cl, n)] = v
			}
		}
	}
	return out
}
