package rig

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// NodeDiagnostics is a short picture of node n's fabric side, for a failed test's output:
// addresses, routes and neighbours of both families, and what br-phy's userspace datapath has
// learned (MACs, tunnel neighbours). A rig's logs vanish with a CI clone; this stays in the
// test output, so a path that broke (a neighbour that went FAILED, a MAC learned on the wrong
// port) can be read from CI.
// OVSDBSocket is the node's Open_vSwitch database socket, for ovs-vsctl --db unix:<it>.
func (c Config) OVSDBSocket(cl, n int) string {
	return filepath.Join(c.runDir(), NodeName(cl, n), "ovs", "db.sock")
}

func (c Config) NodeDiagnostics(cl, n int) string {
	ns := c.NodeNS(cl, n)
	ctl := filepath.Join(c.runDir(), NodeName(cl, n), "ovs", "ovs-vswitchd.ctl")
	var b strings.Builder
	for _, argv := range [][]string{
		{"ip", "-n", ns, "-br", "addr"},
		{"ip", "-n", ns, "route"},
		{"ip", "-n", ns, "-6", "route"},
		{"ip", "-n", ns, "neigh"},
		{"ip", "-n", ns, "-6", "neigh"},
		{"ovs-appctl", "-t", ctl, "fdb/show", "br-phy"},
		{"ovs-appctl", "-t", ctl, "tnl/neigh/show"},
	} {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(argv, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}
