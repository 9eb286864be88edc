package rig

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The foreign AZ (Config.ForeignAZ) is an OVN availability zone that kovn does not manage, as an
// OpenStack/Neutron deployment would be, joined to the rig's IC databases. One host (ForeignNS,
// on the fabric like a node) runs its whole OVN: NB, SB, northd, OVS, ovn-controller (the
// chassis ForeignGatewayChassis, also its interconnect gateway) and ovn-ic. Its topology is
// written with plain ovn-nbctl and ovn-ic-nbctl, never by kovn's code, so tests see what kovn
// meets in the field: a router with two VM networks, whose port on the transit switch
// ForeignTransitSwitch takes ForeignRouterTransitIP (kovn's side of the switch is up to kovn).
// It advertises both VM networks and learns whatever is advertised to it; which of them kovn
// accepts is kovn's business (the agreed one, not the private one). OVN 23.03's ovn-ic
// advertises a connected network as the router port's address with its length: IC-SB's Route
// rows read 10.250.1.1/24 and 10.250.2.1/24, not the masked prefixes.
const (
	ForeignAZName         = "openstack"
	ForeignTransitSwitch  = "ts-openstack"
	ForeignRouter         = "neutron-router"
	ForeignGatewayChassis = "openstack-gw"
	// ForeignTransitPort is the foreign AZ's port on the transit switch; named like kovn's
	// (switch-AZ), so it is unique on the switch whatever kovn's AZ is called.
	ForeignTransitPort = ForeignTransitSwitch + "-" + ForeignAZName
	foreignSup         = "foreign" // the supervisor's name, for StopDaemon and friends
)

// The foreign AZ's address plan: dual stack inside (its VMs and transit port), whatever the
// rig's family; its host's fabric addresses follow the rig's family (ForeignAZIPs).
var (
	ForeignTransitCIDR      = netip.MustParsePrefix("169.254.60.0/24")
	ForeignRouterTransitIP  = netip.MustParseAddr("169.254.60.2")
	ForeignTransitCIDR6     = netip.MustParsePrefix("fd00:a9fe:3c::/64")
	ForeignRouterTransitIP6 = netip.MustParseAddr("fd00:a9fe:3c::2")
	ForeignAgreedCIDR       = netip.MustParsePrefix("10.250.1.0/24") // vm1's network, on "vm-net"
	ForeignPrivateCIDR      = netip.MustParsePrefix("10.250.2.0/24") // vm2's network, on "vm-private"
	ForeignAgreedCIDR6      = netip.MustParsePrefix("fd00:250:1::/64")
	ForeignPrivateCIDR6     = netip.MustParsePrefix("fd00:250:2::/64")
	ForeignVM1IP            = netip.MustParseAddr("10.250.1.10")
	ForeignVM2IP            = netip.MustParseAddr("10.250.2.10")
	ForeignVM1IP6           = netip.MustParseAddr("fd00:250:1::a")
	ForeignVM2IP6           = netip.MustParseAddr("fd00:250:2::a")
)

// foreignNet is one VM network of the foreign AZ: a logical switch on the router, one VM on it.
type foreignNet struct {
	vm, sw           string
	cidr, cidr6      netip.Prefix
	vmIP, vmIP6      netip.Addr
	vmMAC, routerMAC string
}

// Fixed MACs (locally administered) so captures and flows read the same on every run.
var foreignNets = []foreignNet{
	{"vm1", "vm-net", ForeignAgreedCIDR, ForeignAgreedCIDR6, ForeignVM1IP, ForeignVM1IP6, "0a:fa:01:00:00:0a", "0a:fa:01:00:00:01"},
	{"vm2", "vm-private", ForeignPrivateCIDR, ForeignPrivateCIDR6, ForeignVM2IP, ForeignVM2IP6, "0a:fa:02:00:00:0a", "0a:fa:02:00:00:01"},
}

const foreignTransitMAC = "0a:fa:3c:00:00:02"

// routerIP is the router's address on the network: its first host address (10.250.1.1).
func (n foreignNet) routerIP() netip.Addr { return n.cidr.Addr().Next() }

// routerIP6 is the router's IPv6 address on the network (fd00:250:1::1).
func (n foreignNet) routerIP6() netip.Addr { return n.cidr6.Addr().Next() }

// ForeignAZIP is the foreign AZ host on the fabric; 172.30.200.x is outside every cluster's
// 172.30.c.x (c ≤ 9) and the rig's other hosts (172.30.0.x).
func ForeignAZIP() netip.Addr  { return netip.AddrFrom4([4]byte{172, 30, 200, 1}) }
func ForeignAZIP6() netip.Addr { return v6(fabricPrefix6, hexGroup(200), 1) }

func (c Config) ForeignAZIPs() []netip.Addr { return pick(c, ForeignAZIP(), ForeignAZIP6()) }

// ForeignNS is the foreign AZ host's namespace; ForeignVMNS VM i's (1 or 2).
func (c Config) ForeignNS() string        { return c.Prefix + "-faz" }
func (c Config) ForeignVMNS(i int) string { return fmt.Sprintf("%s-fazvm%d", c.Prefix, i) }
func (c Config) foreignRunDir() string    { return filepath.Join(c.runDir(), foreignSup) }
func (c Config) foreignOVNRunDir() string { return filepath.Join(c.foreignRunDir(), "ovn") }
func (c Config) foreignDB(db string) string {
	return "unix:" + filepath.Join(c.foreignOVNRunDir(), db+".sock")
}

// ForeignNBDB and ForeignSBDB are the foreign AZ's OVN databases (unix sockets the host reaches
// too), for ovn-nbctl --db / ovn-sbctl --db.
func (c Config) ForeignNBDB() string { return c.foreignDB("nb") }
func (c Config) ForeignSBDB() string { return c.foreignDB("sb") }

// plugForeignAZ puts the foreign AZ host on the fabric and makes its VMs' namespaces (the
// supervisor plugs them into OVS once br-int exists).
func (r *Rig) plugForeignAZ(plug func(ns, port string, ips []netip.Addr) error) error {
	cfg := r.State.Config
	if err := plug(cfg.ForeignNS(), "faz", cfg.ForeignAZIPs()); err != nil {
		return err
	}
	for i := range foreignNets {
		if err := addNetNS(cfg.ForeignVMNS(i + 1)); err != nil {
			return err
		}
		r.State.Namespaces = append(r.State.Namespaces, cfg.ForeignVMNS(i+1))
	}
	return nil
}

// startForeignAZ starts the foreign AZ once the IC databases serve (its ovn-ic and topology
// step use them); it needs nothing of Kubernetes.
func (r *Rig) startForeignAZ(ctx context.Context) error {
	cfg := r.State.Config
	if !cfg.ForeignAZ {
		return nil
	}
	spec, err := cfg.foreignAZSpec()
	if err != nil {
		return err
	}
	p, err := r.launch(cfg.ForeignNS(), spec)
	if err != nil {
		return err
	}
	return waitSupervisors(ctx, []Proc{p})
}

// foreignAZSpec is the foreign AZ host's supervisor.
func (c Config) foreignAZSpec() (SupervisorSpec, error) {
	dir := filepath.Join(c.Dir, foreignSup)
	logs, ovnDir := filepath.Join(dir, "logs"), filepath.Join(dir, "ovn")
	ovsRun, ovnRun := filepath.Join(c.foreignRunDir(), "ovs"), c.foreignOVNRunDir()
	for _, d := range []string{logs, ovnDir, ovsRun, ovnRun} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return SupervisorSpec{}, err
		}
	}
	files := map[string]string{"nb.db": "ovn-nb.ovsschema", "sb.db": "ovn-sb.ovsschema"}
	confDB := filepath.Join(dir, "ovs", "conf.db")
	for db, schema := range files {
		if err := createDB(filepath.Join(ovnDir, db), filepath.Join(ovnSchemaDir, schema)); err != nil {
			return SupervisorSpec{}, err
		}
	}
	if err := createDB(confDB, filepath.Join(ovsSchemaDir, "vswitch.ovsschema")); err != nil {
		return SupervisorSpec{}, err
	}
	h := ovsHost{name: ForeignGatewayChassis, ips: c.ForeignAZIPs(), sbRemote: c.ForeignSBDB(),
		extraIDs: []string{"ovn-is-interconn=true"}, confDB: confDB, ovsRun: ovsRun, ovnRun: ovnRun, logs: logs}
	nbctl := "ovn-nbctl --db=" + c.ForeignNBDB() + " --timeout=30 "
	northd := h.daemon("ovn-northd", Ready{}, "ovn-northd", "--ovnnb-db="+c.ForeignNBDB(), "--ovnsb-db="+c.ForeignSBDB(),
		"--pidfile="+filepath.Join(ovnRun, "northd.pid"))
	// Restarted like the clusters' ovn-ic, so StopDaemon holds it down (RemoveForeignAZ).
	ovnIC := h.daemon("ovn-ic", Ready{}, append([]string{"ovn-ic", "--ovnnb-db=" + c.ForeignNBDB(), "--ovnsb-db=" + c.ForeignSBDB(),
		"--ic-nb-db=" + c.ICNBEndpoint(), "--ic-sb-db=" + c.ICSBEndpoint(), "--pidfile=" + filepath.Join(ovnRun, "ovn-ic.pid")},
		c.ForeignAZTLS().Args()...)...)
	ovnIC.Restart = true
	topology := h.sh("foreign-topology", c.foreignTopologyCmds()...)
	topology.Timeout = 90 * time.Second // waits up to 60 s for ovn-ic
	vms := h.sh("foreign-vms", c.foreignVMCmds(h)...)
	vms.Timeout = 90 * time.Second
	steps := []Step{
		// Everything of the foreign AZ that uses its NB and SB runs on this host: unix sockets only.
		c.ovsdbServerStep("nb", filepath.Join(ovnDir, "nb.db"), ovnRun, 0, logs, OVSDBTLS{}),
		c.ovsdbServerStep("sb", filepath.Join(ovnDir, "sb.db"), ovnRun, 0, logs, OVSDBTLS{}),
		// The AZ's name and route exchange, set before northd runs: northd creates NB_Global
		// itself when it is missing, and a concurrent `init` would then fail on its maxRows.
		h.sh("nb-global", nbctl+"init", nbctl+"set NB_Global . name="+ForeignAZName+
			" options:ic-route-adv=true options:ic-route-learn=true"),
		northd,
	}
	steps = append(append(steps, h.steps()...), ovnIC, topology, vms)
	// Each VM serves HTTP on 8080 (answering its name and the client's address) and TCP echo
	// on 9000, as the rig's other hosts do.
	for i, n := range foreignNets {
		tb := h.daemon(n.vm+"-testbox", Ready{}, "ip", "netns", "exec", c.ForeignVMNS(i+1),
			filepath.Join(c.KovnBinDir, "kovn-testbox"), "serve", "-http", ":8080", "-tcp", ":9000")
		tb.Restart = true
		steps = append(steps, tb)
	}
	return SupervisorSpec{Name: foreignSup, Dir: dir, Steps: steps}, nil
}

// foreignTopologyCmds write the foreign AZ's logical topology as its operator's own tooling
// would (the "small client that is not kovn"): the router and its VM networks, then the
// transit switch in IC-NB and, once ovn-ic has mirrored it into this AZ's NB, the router's
// port on it, bound to the gateway chassis. --may-exist everywhere: a restarted supervisor
// runs it again.
func (c Config) foreignTopologyCmds() []string {
	nbctl := "ovn-nbctl --db=" + c.ForeignNBDB() + " --timeout=30"
	routerPort := func(sw, lsp, lrp, mac, addr, addr6 string) []string {
		return []string{"-- --may-exist lrp-add", ForeignRouter, lrp, mac, addr, addr6,
			"-- --may-exist lsp-add", sw, lsp, "-- lsp-set-type", lsp, "router", "-- lsp-set-addresses", lsp, "router",
			"-- lsp-set-options", lsp, "router-port=" + lrp}
	}
	net := []string{nbctl, "--may-exist lr-add", ForeignRouter}
	for _, n := range foreignNets {
		net = append(net, "-- --may-exist ls-add", n.sw)
		net = append(net, routerPort(n.sw, n.sw+"-router", ForeignRouter+"-"+n.sw, n.routerMAC,
			netip.PrefixFrom(n.routerIP(), n.cidr.Bits()).String(), netip.PrefixFrom(n.routerIP6(), n.cidr6.Bits()).String())...)
		net = append(net, "-- --may-exist lsp-add", n.sw, n.vm, "-- lsp-set-addresses", n.vm, fmt.Sprintf("'%s %s %s'", n.vmMAC, n.vmIP, n.vmIP6))
	}
	lrp := ForeignRouter + "-ts"
	ts := append([]string{nbctl}, routerPort(ForeignTransitSwitch, ForeignTransitPort, lrp, foreignTransitMAC,
		netip.PrefixFrom(ForeignRouterTransitIP, ForeignTransitCIDR.Bits()).String(),
		netip.PrefixFrom(ForeignRouterTransitIP6, ForeignTransitCIDR6.Bits()).String())...)
	ts = append(ts, "-- lrp-set-gateway-chassis", lrp, ForeignGatewayChassis, "1")
	return []string{
		strings.Join(net, " "),
		strings.Join(append([]string{"ovn-ic-nbctl --db=" + c.ICNBEndpoint()}, c.ForeignAZTLS().Args()...), " ") +
			" --timeout=30 --may-exist ts-add " + ForeignTransitSwitch,
		"i=0; until " + nbctl + " --bare --columns=_uuid find Logical_Switch name=" + ForeignTransitSwitch + " | grep -q .; do",
		"  i=$((i+1)); if [ $i -ge 600 ]; then echo 'ovn-ic did not create " + ForeignTransitSwitch + " in this AZ within 60s' >&2; exit 1; fi; sleep 0.1",
		"done",
		strings.Join(ts, " "),
	}
}

// foreignVMCmds plug each VM into br-int (made by ovn-controller): a veth whose far end is the
// VM's eth0 in its namespace, with the VM's MAC and address and a default route via the
// router. TX checksum offload is off on both ends, as on every kernel interface feeding
// userspace OVS (or TCP fails while ping works); the MTU leaves room for geneve on the way
// to other AZs. Done again from scratch on a rerun. Ends when northd reports the ports up.
func (c Config) foreignVMCmds(h ovsHost) []string {
	vsctl, nbctl := h.vsctl(), "ovn-nbctl --db="+c.ForeignNBDB()+" --timeout=60 "
	cmds := []string{
		"for i in $(seq 300); do " + vsctl + "br-exists br-int && break; sleep 0.1; done",
		vsctl + "br-exists br-int",
	}
	for i, n := range foreignNets {
		ns, vmNS := n.vm, "ip -n "+c.ForeignVMNS(i+1)+" "
		cmds = append(cmds,
			"ip link del "+ns+" 2>/dev/null || true",
			"ip link add "+ns+" mtu 1400 type veth peer name eth0 mtu 1400 netns "+c.ForeignVMNS(i+1),
			vmNS+"link set eth0 address "+n.vmMAC,
			vmNS+"addr add "+netip.PrefixFrom(n.vmIP, n.cidr.Bits()).String()+" dev eth0",
			vmNS+"link set eth0 up",
			vmNS+"addr add "+netip.PrefixFrom(n.vmIP6, n.cidr6.Bits()).String()+" dev eth0 nodad",
			vmNS+"route add default via "+n.routerIP().String(),
			vmNS+"-6 route add default via "+n.routerIP6().String(),
			"ip netns exec "+c.ForeignVMNS(i+1)+" ethtool -K eth0 tx off >/dev/null",
			"sysctl -qw net.ipv6.conf."+ns+".disable_ipv6=1",
			"ethtool -K "+ns+" tx off >/dev/null",
			"ip link set "+ns+" up",
			vsctl+"--if-exists del-port br-int "+ns+" -- add-port br-int "+ns+" -- set Interface "+ns+" external_ids:iface-id="+n.vm,
		)
	}
	for _, n := range foreignNets {
		cmds = append(cmds, nbctl+"wait-until Logical_Switch_Port "+n.vm+" up=true")
	}
	return cmds
}

// ForeignVMExec runs argv in foreign VM i's namespace (1 or 2) and returns its combined
// output: ping, or the testbox (ForeignVMTestbox).
func (c Config) ForeignVMExec(i int, argv ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", c.ForeignVMNS(i)}, argv...)...).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("vm%d: %s: %w", i, strings.Join(argv, " "), err)
	}
	return string(out), err
}

// ForeignVMTestbox runs kovn-testbox in foreign VM i ("tcp ADDR MSG", "ping -c 3 IP", ...).
func (c Config) ForeignVMTestbox(i int, args ...string) (string, error) {
	return c.ForeignVMExec(i, append([]string{filepath.Join(c.KovnBinDir, "kovn-testbox")}, args...)...)
}

// RemoveForeignAZ decommissions the foreign AZ from the interconnect, as its operator would:
// its ovn-ic stops for good (by pid, held down through its supervisor as StopDaemon does),
// then its rows leave IC-SB in one transaction: the Availability_Zone and every Gateway,
// Route and Port_Binding naming it (they refer to it strongly, so they go with it). Other
// AZs' ovn-ic then drop what they had learned of it. The AZ's own OVN keeps running, so its
// VMs still reach each other. Calling it again is harmless.
func (r *Rig) RemoveForeignAZ(ctx context.Context) error {
	st := r.State
	if !st.Config.ForeignAZ {
		return errors.New("this rig has no foreign AZ (kovn-rig up --foreign-az)")
	}
	if err := st.StopDaemon(foreignSup, "ovn-ic"); err != nil {
		if _, running := st.DaemonPid(foreignSup, "ovn-ic"); running == nil {
			return err
		}
	}
	sbctl := func(args ...string) (string, error) {
		argv := append([]string{"--db=" + st.Config.ICSBLocal(), "--timeout=10"}, args...)
		out, err := exec.CommandContext(ctx, "ovn-ic-sbctl", argv...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("ovn-ic-sbctl %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	uuids := func(table, cond string) ([]string, error) {
		out, err := sbctl("--bare", "--columns=_uuid", "find", table, cond)
		return strings.Fields(out), err
	}
	az, err := uuids("Availability_Zone", "name="+ForeignAZName)
	if err != nil || len(az) == 0 {
		return err // already gone
	}
	var txn []string
	for _, table := range []string{"Gateway", "Route", "Port_Binding"} {
		rows, err := uuids(table, "availability_zone="+az[0])
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			txn = append(append(txn, "--", "destroy", table), rows...)
		}
	}
	_, err = sbctl(append(txn, "--", "destroy", "Availability_Zone", az[0])...)
	return err
}

// ForeignAZDiagnostics is a short picture of the foreign AZ for a failed test's output: its
// logical topology and routes (learned ones included), its chassis and bindings.
func (c Config) ForeignAZDiagnostics() string {
	return runAll([][]string{
		{"ovn-nbctl", "--db=" + c.ForeignNBDB(), "--timeout=5", "show"},
		{"ovn-nbctl", "--db=" + c.ForeignNBDB(), "--timeout=5", "lr-route-list", ForeignRouter},
		{"ovn-sbctl", "--db=" + c.ForeignSBDB(), "--timeout=5", "show"},
	})
}
