package rig

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	kovnovsdb "github.com/kovn/kovn/deploy/ovsdb"
	"github.com/kovn/kovn/pkg/annotation"
)

// ovnSchemaDir and ovsSchemaDir are where Debian's packages ship the OVSDB schemas.
const (
	ovnSchemaDir = "/usr/share/ovn"
	ovsSchemaDir = "/usr/share/openvswitch"
)

// runDir holds sockets: kept short because unix socket paths are limited to 108 bytes.
func (c Config) runDir() string { return filepath.Join("/run", "kovn-rig-"+c.Prefix) }

func (c Config) k8sBin(name string) string { return filepath.Join(c.K8sBinDir, name) }

// createDB makes a standalone OVSDB file from a schema unless it exists.
func createDB(file, schema string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("ovsdb-tool", "create", file, schema).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create %s: %v: %s", file, err, out)
	}
	return nil
}

// ovsdbServerStep serves one database file on a unix socket and on port (every family the rig
// carries: an IPv6 wildcard socket also takes IPv4): with mutual TLS as identity tls, on plain
// TCP when tls is empty (InsecurePlainTCP); port 0 serves the unix socket only.
// Further database files (extraDBs) are served by the same server, on the same sockets.
func (c Config) ovsdbServerStep(name, db, run string, port int, logDir string, tls OVSDBTLS, extraDBs ...string) Step {
	sock := filepath.Join(run, name+".sock")
	argv := append([]string{"ovsdb-server", db}, extraDBs...)
	argv = append(argv, "--remote=punix:"+sock)
	switch {
	case port == 0:
	case tls.Dir == "":
		argv = append(argv, fmt.Sprintf("--remote=ptcp:%d:%s", port, ovsdbHost(c.anyAddr())))
	default:
		argv = append(append(argv, fmt.Sprintf("--remote=pssl:%d:%s", port, ovsdbHost(c.anyAddr()))), tls.Args()...)
	}
	return Step{
		Name: "ovsdb-server-" + name, Daemon: true, Log: filepath.Join(logDir, "ovsdb-server-"+name+".log"),
		Argv:  append(argv, "--pidfile="+filepath.Join(run, name+".pid"), "--unixctl="+filepath.Join(run, name+".ctl")),
		Ready: Ready{Unix: sock},
	}
}

// sbServerSteps serve the SB database and give its network listener OVN's role ovn-controller
// (SB RBAC): a client then writes only what its certificate's CN names as its chassis (its
// Chassis, Chassis_Private and Encap rows, its ports' bindings). The listener is a Connection
// row rather than a command-line remote because only those carry a role; the unix socket, for
// northd, kovn-controller and tools on this host, has none. InsecurePlainTCP keeps the plain
// listener (RBAC needs a certificate's CN).
func (c Config) sbServerSteps(db, run, logs string, tls OVSDBTLS) []Step {
	if tls.Dir == "" {
		return []Step{c.ovsdbServerStep("sb", db, run, PortSB, logs, tls)}
	}
	server := c.ovsdbServerStep("sb", db, run, 0, logs, tls)
	server.Argv = append(server.Argv, "--remote=db:OVN_Southbound,SB_Global,connections")
	server.Argv = append(server.Argv, tls.Args()...)
	sbctl := "ovn-sbctl --db=unix:" + filepath.Join(run, "sb.sock") + " --timeout=30 "
	// Before northd runs: northd creates SB_Global when it is missing, and a concurrent init
	// would then fail on its maxRows.
	conn := Step{Name: "sb-connection", Log: filepath.Join(logs, "sb-connection.log"), Argv: []string{"/bin/sh", "-ec",
		sbctl + "init\n" + sbctl + fmt.Sprintf("set-connection role=ovn-controller 'pssl:%d:%s'", PortSB, ovsdbHost(c.anyAddr()))}}
	return []Step{server, conn}
}

// controlPlaneSpec is cluster cl's supervisor: etcd, kube-apiserver, controller-manager,
// scheduler and OVN central (NB, SB, northd).
func (c Config) controlPlaneSpec(cl int, pki clusterPKI) (SupervisorSpec, error) {
	dir := c.ClusterDir(cl)
	logs := filepath.Join(dir, "logs")
	run := filepath.Join(c.runDir(), ClusterName(cl))
	ovnDir := filepath.Join(dir, "ovn")
	for _, d := range []string{logs, run, ovnDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return SupervisorSpec{}, err
		}
	}
	for db, schema := range map[string]string{"nb": "ovn-nb.ovsschema", "sb": "ovn-sb.ovsschema"} {
		if err := createDB(filepath.Join(ovnDir, db+".db"), filepath.Join(ovnSchemaDir, schema)); err != nil {
			return SupervisorSpec{}, err
		}
	}
	ip := c.ControlPlaneIPs(cl)[0].String()
	apiURL := "https://" + hostPort(c.ControlPlaneIPs(cl)[0], PortAPIServer)
	admin := filepath.Join(dir, "admin-internal.kubeconfig")
	if err := pki.writeKubeconfig(admin, ClusterName(cl), apiURL, "admin", pki.AdminToken); err != nil {
		return SupervisorSpec{}, err
	}
	step := func(name string, ready Ready, argv ...string) Step {
		return Step{Name: name, Argv: argv, Daemon: true, Log: filepath.Join(logs, name+".log"), Ready: ready, Timeout: 90 * time.Second}
	}
	steps := []Step{
		step("etcd", Ready{TCP: fmt.Sprintf("127.0.0.1:%d", PortEtcd)}, "etcd", "--name", ClusterName(cl),
			"--data-dir", filepath.Join(dir, "etcd"),
			"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", PortEtcd),
			"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", PortEtcd),
			"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", PortEtcdPeer),
			"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", PortEtcdPeer),
			"--initial-cluster", fmt.Sprintf("%s=http://127.0.0.1:%d", ClusterName(cl), PortEtcdPeer)),
		step("kube-apiserver", Ready{HTTPS: apiURL + "/readyz", Token: pki.AdminToken},
			c.k8sBin("kube-apiserver"), "--bind-address="+c.anyAddr(), "--advertise-address="+ip,
			fmt.Sprintf("--secure-port=%d", PortAPIServer), fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", PortEtcd),
			"--tls-cert-file="+pki.path("apiserver.crt"), "--tls-private-key-file="+pki.path("apiserver.key"),
			"--client-ca-file="+pki.path("ca.crt"), "--token-auth-file="+pki.path("tokens.csv"),
			"--authorization-mode=Node,RBAC", "--service-account-key-file="+pki.path("sa.pub"),
			"--service-account-signing-key-file="+pki.path("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range="+annotation.JoinAddrs(c.ServiceCIDRs(cl)),
			"--allow-privileged=true", "--kubelet-preferred-address-types=InternalIP,Hostname",
			"--enable-admission-plugins=NodeRestriction"),
		step("kube-controller-manager", Ready{}, c.k8sBin("kube-controller-manager"), "--kubeconfig="+admin,
			"--bind-address=127.0.0.1", "--leader-elect=false", "--cluster-name="+ClusterName(cl),
			"--service-account-private-key-file="+pki.path("sa.key"), "--root-ca-file="+pki.path("ca.crt"),
			"--use-service-account-credentials=false", "--controllers=*,-nodeipam",
			"--cluster-cidr="+annotation.JoinAddrs(c.PodCIDRs(cl)), "--service-cluster-ip-range="+annotation.JoinAddrs(c.ServiceCIDRs(cl)), "--node-monitor-grace-period=20s",
			"--flex-volume-plugin-dir="+filepath.Join(dir, "kcm-flex")),
		step("kube-scheduler", Ready{}, c.k8sBin("kube-scheduler"), "--kubeconfig="+admin,
			"--bind-address=127.0.0.1", "--leader-elect=false"),
		c.ovsdbServerStep("nb", filepath.Join(ovnDir, "nb.db"), run, PortNB, logs, c.NBServerTLS(cl)),
	}
	steps = append(steps, c.sbServerSteps(filepath.Join(ovnDir, "sb.db"), run, logs, c.SBServerTLS(cl))...)
	steps = append(steps, Step{Name: "ovn-northd", Daemon: true, Log: filepath.Join(logs, "ovn-northd.log"),
		Env: []string{"OVN_RUNDIR=" + run},
		Argv: []string{"ovn-northd", "--ovnnb-db=unix:" + filepath.Join(run, "nb.sock"),
			"--ovnsb-db=unix:" + filepath.Join(run, "sb.sock"), "--pidfile=" + filepath.Join(run, "northd.pid")}})
	// kube-apiserver's graceful shutdown waits (up to its 60 s request timeout) for every client
	// connection to close; connections from pods whose node's datapath is already gone never
	// do, and every rig teardown waited out the 10 s grace. Nothing of a torn-down rig needs
	// the drain.
	for i := range steps {
		if steps[i].Name == "kube-apiserver" {
			steps[i].StopGrace = time.Second
		}
	}
	if c.Chart() {
		// OVN central, ovn-ic and kovn-controller are the chart's pods: the control plane is
		// Kubernetes alone (and the cluster DNS objects, whose pods run once kovn does).
		steps = append(steps[:4:4], c.dnsStep(cl, admin, logs))
		return SupervisorSpec{Name: ClusterName(cl), Dir: dir, Steps: steps}, nil
	}
	if c.Interconnected() {
		// ovn-ic joins this cluster's OVN to the clusterset once kovn names its AZ
		// (InterConnect); until then it waits.
		steps = append(steps, Step{Name: "ovn-ic", Daemon: true, Restart: true, Log: filepath.Join(logs, "ovn-ic.log"),
			Env: []string{"OVN_RUNDIR=" + run},
			Argv: append([]string{"ovn-ic", "--ovnnb-db=unix:" + filepath.Join(run, "nb.sock"), "--ovnsb-db=unix:" + filepath.Join(run, "sb.sock"),
				"--ic-nb-db=" + c.ICNBEndpoint(), "--ic-sb-db=" + c.ICSBEndpoint(), "--pidfile=" + filepath.Join(run, "ovn-ic.pid")},
				c.AZTLS(cl).Args()...)})
	}
	if c.FakeNodes > 0 {
		fake, err := c.fakeNodesStep(cl, admin, logs)
		if err != nil {
			return SupervisorSpec{}, err
		}
		steps = append(steps, fake)
	}
	if c.Kovn {
		kubeconfig := c.ControllerKubeconfig(cl)
		cr := Credentials{AdminKubeconfig: admin, ServiceAccount: ControllerServiceAccount, ApplyChartWith: c.helmBin(), Out: kubeconfig}
		if c.Interconnected() {
			cr.ClustersetTLSDir = c.AZTLS(cl).Dir
		}
		steps = append(steps, c.credentialsStep("kovn-controller-credentials", logs, cr))
		steps = append(steps, Step{Name: "kovn-controller", Daemon: true, Restart: true, Log: filepath.Join(logs, "kovn-controller.log"),
			Argv: []string{filepath.Join(c.KovnBinDir, "kovn-controller"), "--kubeconfig=" + kubeconfig,
				"--ovn-nb-addr=" + c.controllerNBAddr(cl, run), "--ovn-sb-addr=unix:" + filepath.Join(run, "sb.sock"), "--default-cidr=" + annotation.JoinAddrs(c.PodCIDRs(cl)),
				"--join-cidr=" + annotation.JoinAddrs(c.JoinCIDRs()), "--leader-elect=true",
				"--external-ip-cidrs=" + annotation.JoinAddrs(ExternalIPCIDRs()), "--attachment-host-interfaces=" + UnderlayNIC,
				// The cluster's OVN PKI and chassis CSR signer, as the chart runs them. The
				// rig's own databases trust the rig's CAs (ovntls.go), not these.
				"--ovn-pki", "--ovn-central-addresses=" + annotation.JoinAddrs(c.ControlPlaneIPs(cl)),
				fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", PortControllerMetrics), "--metrics-secure=false",
				fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", PortControllerHealth)}})
		if c.ControllerNBOverNetwork && !c.InsecurePlainTCP {
			steps[len(steps)-1].Argv = append(steps[len(steps)-1].Argv, "--ovn-tls-dir="+c.NBAdminTLS(cl).Dir)
		}
		// Cluster DNS runs on kovn (its pods and Service need it), so it comes with kovn.
		steps = append(steps, c.dnsStep(cl, admin, logs))
	}
	return SupervisorSpec{Name: ClusterName(cl), Dir: dir, Steps: steps}, nil
}

// controllerNBAddr is where kovn-controller reaches NB: the unix socket, or with
// ControllerNBOverNetwork the control plane's address.
func (c Config) controllerNBAddr(cl int, run string) string {
	if !c.ControllerNBOverNetwork {
		return "unix:" + filepath.Join(run, "nb.sock")
	}
	return c.ovsdbScheme() + ":" + hostPort(c.ControlPlaneIPs(cl)[0], PortNB)
}

// interconnectSpec serves the OVN-IC northbound and southbound databases shared by all
// clusters: one ovsdb-server each, or with ICRaft a 3-member raft cluster each (members after
// the first restart like pods, so a test can kill a leader and have it rejoin).
func (c Config) interconnectSpec() (SupervisorSpec, error) {
	dir := filepath.Join(c.Dir, "ic")
	logs := filepath.Join(dir, "logs")
	run := filepath.Join(c.runDir(), "ic")
	for _, d := range []string{logs, run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return SupervisorSpec{}, err
		}
	}
	// kovn's clusterset store (OVN_ClusterSet) is served beside IC-SB by the same servers.
	csSchema := filepath.Join(dir, "ovn-clusterset.ovsschema")
	if err := os.WriteFile(csSchema, kovnovsdb.ClusterSetSchema, 0o644); err != nil {
		return SupervisorSpec{}, err
	}
	type database struct{ name, schema, dbName string }
	var steps []Step
	for _, srv := range []struct {
		dbs  []database
		port int
	}{
		{[]database{{"icnb", filepath.Join(ovnSchemaDir, "ovn-ic-nb.ovsschema"), "OVN_IC_Northbound"}}, PortICNB},
		{[]database{{"icsb", filepath.Join(ovnSchemaDir, "ovn-ic-sb.ovsschema"), "OVN_IC_Southbound"},
			{"clusterset", csSchema, kovnovsdb.ClusterSetDB}}, PortICSB},
	} {
		members := 1
		if c.ICRaft {
			members = ICRaftMembers
		}
		for m := 0; m < members; m++ {
			var files []string
			for k, db := range srv.dbs {
				// Each raft cluster talks on its own port: the server's port + 2, + 3, ...
				raft := func(m int) string {
					return c.ovsdbScheme() + ":" + hostPort(c.ICDBIPs()[0], icMemberPort(srv.port, m)+2+k)
				}
				file := filepath.Join(dir, ICDBMemberName(db.name, m)+".db")
				var err error
				switch {
				case !c.ICRaft:
					err = createDB(file, db.schema)
				case m == 0:
					err = ovsdbTool(file, "create-cluster", file, db.schema, raft(0))
				default:
					err = ovsdbTool(file, "join-cluster", file, db.dbName, raft(m), raft(0))
				}
				if err != nil {
					return SupervisorSpec{}, err
				}
				files = append(files, file)
			}
			name, port, tls := ICDBMemberName(srv.dbs[0].name, m), icMemberPort(srv.port, m), c.ICServerTLS()
			relayed := srv.port == PortICSB && tls.Dir != ""
			if relayed {
				port = 0 // the relay listens on the network; the server on its unix socket (and raft port)
			}
			st := c.ovsdbServerStep(name, files[0], run, port, logs, tls, files[1:]...)
			if relayed {
				st.Argv = append(st.Argv, tls.Args()...) // the raft port's
			}
			// Restarted when it exits, as a service manager would, standalone too: the tests
			// stop and start it (StopDaemon/StartDaemon) to prove the clusters reconnect.
			st.Restart = true
			steps = append(steps, st)
			if relayed {
				steps = append(steps, c.icAuthzStep(name, run, logs, icMemberPort(srv.port, m)))
			}
		}
	}
	if c.ICRaft && c.Kovn {
		for m := range ICRaftMembers {
			steps = append(steps, c.icMonitorStep(dir, logs, m))
		}
	}
	return SupervisorSpec{Name: "ic", Dir: dir, Steps: steps}, nil
}

// icAuthzStep runs kovn's authorizing relay (kovn-ovsdb ic-authz) on IC-SB member name's
// network port: each AZ's certificate writes only its own AZ's rows (pkg/interconnect/icauthz).
func (c Config) icAuthzStep(name, run, logs string, port int) Step {
	tls := c.ICServerTLS()
	step := "kovn-ic-authz-" + name
	argv := []string{filepath.Join(c.KovnBinDir, "kovn-ovsdb"), "-cert", tls.Cert(), "-key", tls.Key(), "-cacert", tls.CA(),
		"ic-authz", net.JoinHostPort(c.anyAddr(), strconv.Itoa(port)), filepath.Join(run, name+".sock")}
	return Step{Name: step, Daemon: true, Restart: true, Log: filepath.Join(logs, step+".log"), Argv: argv,
		Ready: Ready{TCP: hostPort(c.ICDBIPs()[0], port)}}
}

// icMonitorStep runs kovn-ovn-monitor for raft member m of both IC databases (as the chart's
// ovn-central pod does for the databases it serves).
func (c Config) icMonitorStep(dir, logs string, m int) Step {
	name := fmt.Sprintf("kovn-ovn-monitor-%d", m+1)
	argv := []string{filepath.Join(c.KovnBinDir, "kovn-ovn-monitor"), "--nb-cfg-probe-interval=0",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", PortICMonitor+2*m),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", PortICMonitor+2*m+1)}
	for _, db := range []struct{ label, schema, name string }{{"ic-nb", "OVN_IC_Northbound", "icnb"}, {"ic-sb", "OVN_IC_Southbound", "icsb"}} {
		member := ICDBMemberName(db.name, m)
		argv = append(argv, fmt.Sprintf("--database=%s=%s:%s:%s", db.label, db.schema, c.ICDBCtl(member), filepath.Join(dir, member+".db")))
	}
	return Step{Name: name, Daemon: true, Restart: true, Log: filepath.Join(logs, name+".log"), Argv: argv,
		Ready: Ready{TCP: fmt.Sprintf("127.0.0.1:%d", PortICMonitor+2*m)}}
}

// ICDBMemberName names member m (0-based) of IC database db ("icsb", "icsb2", "icsb3"); its
// supervisor step is "ovsdb-server-" + the name and its unixctl socket ICDBCtl.
func ICDBMemberName(db string, m int) string {
	if m == 0 {
		return db
	}
	return fmt.Sprintf("%s%d", db, m+1)
}

// ICDBCtl is the unixctl socket of IC database member name (ovs-appctl -t, cluster/status).
func (c Config) ICDBCtl(name string) string { return filepath.Join(c.runDir(), "ic", name+".ctl") }

// ovsdbTool runs ovsdb-tool to create file unless it exists (a rig restarted in place keeps
// its databases).
func ovsdbTool(file string, args ...string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	if out, err := exec.Command("ovsdb-tool", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// externalHostSpec is a host outside the clusters serving HTTP on 8080 and TCP echo on 9000;
// its HTTP answer names the client address it saw, which shows whether traffic was SNATed.
func (c Config) externalHostSpec() SupervisorSpec {
	dir := filepath.Join(c.Dir, "ext")
	_ = os.MkdirAll(dir, 0o755)
	return SupervisorSpec{Name: "ext", Dir: dir, Steps: []Step{{Name: "testbox", Daemon: true,
		Log: filepath.Join(dir, "testbox.log"), Ready: Ready{TCP: hostPort(c.ExternalHostIPs()[0], 8080)},
		Argv: []string{filepath.Join(c.KovnBinDir, "kovn-testbox"), "serve", "-http", ":8080", "-tcp", ":9000"}}}}
}

// ovsdbHost is an address as OVSDB connection strings write it: IPv6 in brackets.
func ovsdbHost(a string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]"
	}
	return a
}
