package rig

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// ovsHost is a host of the fabric running userspace OVS and an OVN chassis: a node, or the
// foreign AZ's gateway. Both need the same arrangement (their fabric address on br-phy, so
// geneve egresses through OVS), so it is written once.
type ovsHost struct {
	name                         string       // chassis name (system-id) and hostname
	ips                          []netip.Addr // fabric addresses, primary (the encap IP) first
	sbRemote                     string       // ovn-controller's SB database
	tls                          OVSDBTLS     // ovn-controller's identity (CN = chassis name) for an ssl: sbRemote
	extraIDs                     []string     // further Open_vSwitch external_ids, "key=value"
	routes                       []string     // shell commands run once the address is on br-phy (and restored with it)
	confDB, ovsRun, ovnRun, logs string
}

func (h ovsHost) dbSock() string { return filepath.Join(h.ovsRun, "db.sock") }

func (h ovsHost) env() []string {
	return []string{"OVS_RUNDIR=" + h.ovsRun, "OVN_RUNDIR=" + h.ovnRun, "OVS_DBDIR=" + filepath.Dir(h.confDB)}
}

// vsctl is the ovs-vsctl command prefix for shell steps.
func (h ovsHost) vsctl() string { return "ovs-vsctl --db=unix:" + h.dbSock() + " --timeout=30 " }

// sh is a one-shot shell step (-e: the first failing command fails it).
func (h ovsHost) sh(name string, cmds ...string) Step {
	return Step{Name: name, Env: h.env(), Log: filepath.Join(h.logs, name+".log"),
		Argv: []string{"/bin/sh", "-ec", strings.Join(cmds, "\n")}}
}

func (h ovsHost) daemon(name string, ready Ready, argv ...string) Step {
	return Step{Name: name, Env: h.env(), Daemon: true, Log: filepath.Join(h.logs, name+".log"), Argv: argv, Ready: ready}
}

// steps are ovsdb-server, the chassis identity, ovs-vswitchd, br-phy (with its keeper) and
// ovn-controller.
func (h ovsHost) steps() []Step {
	ip, dbSock, vsctl := h.ips[0].String(), h.dbSock(), h.vsctl()
	brPhyAddrs := []string{"ip addr flush dev eth0"}
	for _, a := range FabricAddrs(h.ips) {
		brPhyAddrs = append(brPhyAddrs, "ip "+strings.Join(addrAddArgs(a, "br-phy"), " "))
	}
	ids := append([]string{"system-id=" + h.name, "hostname=" + h.name, "ovn-remote=" + h.sbRemote,
		"ovn-encap-type=geneve", "ovn-encap-ip=" + ip, "ovn-bridge-datapath-type=netdev"}, h.extraIDs...)
	// ovs-vswitchd 3.1's userspace conntrack can abort (an assertion in conn_update_state,
	// seen under NAT load in the lab). Like a node's service manager, the rig starts it again.
	// Its internal ports (br-phy, ovn0) are persistent taps: they lose carrier while it is down
	// and keep their addresses. Should they ever come back bare (the ports deleted and added
	// again), brPhyKeeper restores the host address, as the host's own network configuration
	// would, and kovn-daemon restores ovn0 on the netlink event.
	vswitchd := h.daemon("ovs-vswitchd", Ready{Unix: filepath.Join(h.ovsRun, "ovs-vswitchd.ctl")}, "ovs-vswitchd", "unix:"+dbSock,
		"--disable-system", "--pidfile="+filepath.Join(h.ovsRun, "ovs-vswitchd.pid"),
		"--unixctl="+filepath.Join(h.ovsRun, "ovs-vswitchd.ctl"))
	vswitchd.Restart = true
	brPhyKeeper := h.daemon("br-phy-keeper", Ready{}, "/bin/sh", "-c", strings.Join([]string{
		"while :; do",
		"  if ip link show br-phy >/dev/null 2>&1 && ! ip -br addr show dev br-phy | grep -qF ' " + ip + "/'; then",
		"    echo \"$(date -Is) br-phy is back without its addresses (ovs-vswitchd restarted): restoring them\"",
		"    " + strings.Join(append(brPhyAddrs[1:], h.routes...), "; ") + "; ip link set br-phy up; ethtool -K br-phy tx off >/dev/null",
		"  fi",
		"  sleep 0.5",
		"done"}, "\n"))
	brPhyKeeper.Restart = true
	// ovn-controller is started again when it exits, as its DaemonSet would; tests crash it
	// and hold it down (CrashDaemon, StartDaemon).
	ovnController := h.daemon("ovn-controller", Ready{}, "ovn-controller", "unix:"+dbSock,
		"--pidfile="+filepath.Join(h.ovnRun, "ovn-controller.pid"))
	ovnController.Restart = true
	init := []string{vsctl + "--no-wait init", vsctl + "--no-wait set Open_vSwitch . external_ids:" + strings.Join(ids, " external_ids:")}
	if h.tls.Dir != "" {
		// Its identity is the Open_vSwitch SSL row, as kovn-daemon sets it on a node: files
		// named there are read again whenever they change (command-line ones only at start),
		// so a renewed certificate or CA bundle needs no restart.
		init = append(init, vsctl+"--no-wait set-ssl "+strings.Join([]string{h.tls.Key(), h.tls.Cert(), h.tls.CA()}, " "))
	}
	return []Step{
		h.daemon("ovsdb-server", Ready{Unix: dbSock}, "ovsdb-server", h.confDB, "--remote=punix:"+dbSock,
			"--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
			"--pidfile="+filepath.Join(h.ovsRun, "ovsdb-server.pid"), "--unixctl="+filepath.Join(h.ovsRun, "ovsdb-server.ctl")),
		// The chassis identity: what ovn-controller needs to register in the SB database.
		h.sh("ovs-init", init...),
		vswitchd,
		// Userspace geneve egresses through a netdev bridge that owns the host address. TX
		// checksum offload must be off on kernel interfaces feeding OVS or TCP breaks. eth0
		// is only OVS's port, but the kernel still sees every frame on it: without ARP off
		// and IPv6 disabled there, it answered ARP for the host address with eth0's MAC
		// (racing br-phy's answer) and kept neighbours of its own on eth0.
		h.sh("br-phy", slices.Concat([]string{
			vsctl + "-- --may-exist add-br br-phy -- set bridge br-phy datapath_type=netdev -- --may-exist add-port br-phy eth0",
			"for i in $(seq 100); do ip link show br-phy >/dev/null 2>&1 && break; sleep 0.1; done"},
			brPhyAddrs, []string{"ip link set br-phy up"}, h.routes,
			[]string{"ip link set eth0 arp off", "sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1",
				"ethtool -K eth0 tx off >/dev/null", "ethtool -K br-phy tx off >/dev/null"})...),
		brPhyKeeper,
		ovnController,
	}
}
