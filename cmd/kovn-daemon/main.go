// Command kovn-daemon runs on every node: it plumbs the node (ovn0 on the join subnet, routes
// to pod subnets, SNAT, CNI config, provider bridges of underlay networks) and serves the kovn-cni shim on a unix socket, creating
// each pod's veth, attaching it to br-int and waiting until OVN has installed its flows.
//
// `kovn-daemon cleanup-node` removes all of that again: helm uninstall runs it on every node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/metricsauth"
	"github.com/kovn/kovn/pkg/node"
	"github.com/kovn/kovn/pkg/node/bootstrap"
	"github.com/kovn/kovn/pkg/node/chassistls"
	"github.com/kovn/kovn/pkg/node/cleanup"
	"github.com/kovn/kovn/pkg/node/mirror"
	"github.com/kovn/kovn/pkg/ovn"
)

// chassisTLSDir and pkiNamespace: where the chassis certificate goes, and where its CA is.
var chassisTLSDir, pkiNamespace string

// chassisRecheck is how often the CA ConfigMap is read again.
var chassisRecheck time.Duration

// metricsSecure: metrics over TLS to reviewed tokens only (metricsauth).
var metricsSecure bool

func main() {
	if len(os.Args) > 1 && os.Args[1] == "cleanup-node" {
		os.Exit(cleanupNode(os.Args[2:]))
	}
	cfg := node.Config{Config: bootstrap.Config{Bridge: "br-int", JoinSubnet: "join"}, AttachmentNetworks: true}
	flag.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	ovsDB := flag.String("ovs-db", "unix:/var/run/openvswitch/db.sock", "the node's Open_vSwitch database")
	flag.StringVar(&cfg.CNISocket, "cni-socket", "/run/kovn/cni.sock", "unix socket the kovn-cni shim talks to")
	flag.StringVar(&cfg.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "where to write the CNI network config")
	flag.StringVar(&cfg.OVNRemote, "ovn-remote", os.Getenv("OVN_SB_DB"), "OVN southbound endpoints for ovn-controller (env OVN_SB_DB; empty keeps the configured one)")
	flag.BoolVar(&cfg.Netdev, "netdev", false, "the node runs OVS's userspace datapath (br-int datapath_type=netdev)")
	flag.IntVar(&cfg.MTU, "mtu", 1400, "pod and ovn0 MTU (fabric MTU minus geneve overhead)")
	ovnRun := os.Getenv("OVN_RUNDIR")
	if ovnRun == "" {
		ovnRun = "/var/run/ovn"
	}
	flag.StringVar(&cfg.OVNControllerPidfile, "ovn-controller-pidfile", filepath.Join(ovnRun, "ovn-controller.pid"),
		"ovn-controller's pidfile: on an interconnect gateway, its death turns BFD off so the peers fail over")
	if cfg.OVSRunDir = os.Getenv("OVS_RUNDIR"); cfg.OVSRunDir == "" {
		cfg.OVSRunDir = "/var/run/openvswitch"
	}
	flag.StringVar(&cfg.VswitchdCtl, "ovs-vswitchd-ctl", "", "ovs-vswitchd's control socket (default: ovs-vswitchd.<pid>.ctl in $OVS_RUNDIR or /var/run/openvswitch); with --netdev, kovn-daemon keeps its tunnel neighbour cache")
	flag.StringVar(&cfg.CNIBinDir, "cni-bin-dir", "/opt/cni/bin", "where the delegate plugins of attachment networks are (macvlan, ipvlan, bridge, host-device, static)")
	flag.StringVar(&cfg.StateDir, "state-dir", "/run/kovn", "kovn-daemon's state: the records a CNI DEL needs to remove a pod's attachments")
	flag.BoolVar(&cfg.AttachmentNetworks, "attachment-networks", true,
		"plumb the pods' k8s.v1.cni.cncf.io/networks (NPWG attachment networks); false when a meta-plugin such as Multus does and calls kovn-cni for eth0 only (kovn-controller's flag must agree)")
	metricsAddr := flag.String("metrics-bind-address", ":9474", "Prometheus metrics address (0 turns them off)")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, metricsauth.FlagUsage)
	probeAddr := flag.String("health-probe-bind-address", ":9475", "/livez and /readyz address, independent of metrics (0 turns them off)")
	flag.StringVar(&cfg.ProxyHealthzAddr, "proxy-healthz-bind-address", "0.0.0.0:10256",
		"kube-proxy's health port, answered in its place: /healthz and /livez, 200 while the node's Service programming is current (0 turns it off)")
	flag.StringVar(&cfg.ProxyStatusAddr, "proxy-status-bind-address", "127.0.0.1:10249",
		"kube-proxy's status port, answered in its place: /proxyMode says \"kovn\" (0 turns it off)")
	hostIfaces := flag.String("attachment-host-interfaces", "", "comma-separated node interfaces attachment delegates may name (macvlan/ipvlan master, host-device device, "+
		"bridge name; kovn-controller's flag must agree); empty: none")
	externalIPCIDRs := flag.String("external-ip-cidrs", "", "comma-separated ranges a Service's spec.externalIPs may come from (kovn-controller's flag must agree); "+
		"empty: the node translates no external IP, neither for traffic it receives nor for its own")
	serviceCIDRs := flag.String("service-cidrs", "", "the cluster's Service ranges, comma-separated (kube-apiserver --service-cluster-ip-range): routed through ovn0 so the node reaches ClusterIPs")
	mirrorNamespaces := flag.String("mirror-namespaces", "", "with --mirror=annotated: comma-separated namespaces whose pods' "+
		"ovn.kovn.io/mirror annotation is honoured (\"*\": any); empty: none")
	mirrorFlag := flag.String("mirror", string(mirror.Annotated), "traffic mirroring to the node's mirror0: off, annotated (pods annotated ovn.kovn.io/mirror=true) or all (every pod of the node)")
	remote := flag.String("mirror-remote", "", "also send mirrored traffic to a collector: gre:IP[:KEY] or erspan:IP[:INDEX]")
	flag.DurationVar(&chassisRecheck, "ovn-chassis-recheck", chassistls.Recheck, "with --ovn-chassis-tls-dir: how often to read the CA ConfigMap again "+
		"(a CA rotation step must be longer)")
	flag.StringVar(&chassisTLSDir, "ovn-chassis-tls-dir", "", "get this node's chassis certificate (CSR of signer kovn.io/ovn-chassis, signed by kovn-controller --ovn-pki) into this directory, which ovn-controller sees at the same path, and point the Open_vSwitch SSL row at it; empty: leave ovn-controller's TLS alone")
	flag.StringVar(&pkiNamespace, "namespace", envOr("POD_NAMESPACE", "kube-system"), "kovn's namespace: where the ConfigMap "+ovnpki.CAConfigMap+" (the OVN central CA) is")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	var err error
	cfg.MirrorNamespaces = annotation.ParseList(*mirrorNamespaces)
	if cfg.Mirror, err = mirror.ParseMode(*mirrorFlag); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon: --mirror:", err)
		os.Exit(2)
	}
	if cfg.MirrorRemote, err = mirror.ParseRemote(*remote); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon: --mirror-remote:", err)
		os.Exit(2)
	}
	cfg.AttachmentHostInterfaces = annotation.ParseList(*hostIfaces)
	if *externalIPCIDRs != "" {
		if cfg.ExternalIPCIDRs, err = annotation.ParsePrefixes(*externalIPCIDRs); err != nil {
			fmt.Fprintf(os.Stderr, "kovn-daemon: --external-ip-cidrs %q: %v\n", *externalIPCIDRs, err)
			os.Exit(2)
		}
	}
	if *serviceCIDRs != "" {
		if cfg.ServiceCIDRs, err = annotation.ParsePrefixes(*serviceCIDRs); err != nil {
			fmt.Fprintf(os.Stderr, "kovn-daemon: --service-cidrs %q: %v\n", *serviceCIDRs, err)
			os.Exit(2)
		}
	}
	if err := run(cfg, *ovsDB, *metricsAddr, *probeAddr); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon:", err)
		os.Exit(1)
	}
}

// cleanupNode is the cleanup-node subcommand: it removes kovn's state from this node, printing
// one line per item, and returns the exit code (1 if any item failed, 2 on bad flags).
func cleanupNode(args []string) int {
	fs := flag.NewFlagSet("kovn-daemon cleanup-node", flag.ContinueOnError)
	opts := cleanup.Options{Out: os.Stdout}
	fs.StringVar(&opts.OVSDB, "ovs-db", "unix:/var/run/openvswitch/db.sock", "the node's Open_vSwitch database")
	fs.StringVar(&opts.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "where kovn-daemon wrote the CNI network config")
	fs.StringVar(&opts.CNIBinDir, "cni-bin-dir", "/opt/cni/bin", "where install-cni put the kovn-cni plugin")
	fs.StringVar(&opts.RunDir, "run-dir", "/run/kovn", "kovn-daemon's run directory (cni.sock), emptied")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kovn-daemon cleanup-node: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := cleanup.Node(ctx, opts)
	fmt.Printf("kovn-daemon cleanup-node: %d removed, %d left, %d failed\n", len(rep.Removed), len(rep.Left), len(rep.Failed))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon cleanup-node:", err)
		return 1
	}
	return 0
}

// run connects to the node's Open_vSwitch database, builds the manager (caching only this
// node's objects) and lets node.Setup add every node runnable to it.
func run(cfg node.Config, ovsDB, metricsAddr, probeAddr string) error {
	if cfg.NodeName == "" {
		return errors.New("no node name: set --node-name or NODE_NAME")
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), kovnv1.AddToScheme(scheme), nadv1.AddToScheme(scheme)); err != nil {
		return err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	connectCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ovs, err := ovn.ConnectOVS(connectCtx, ovn.Config{Endpoints: []string{ovsDB}, Logger: ctrl.Log.WithName("ovs")})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{Scheme: scheme, Metrics: metricsauth.ServerOptions(metricsAddr, metricsSecure),
		HealthProbeBindAddress: probeAddr, LivenessEndpointName: "/livez", ReadinessEndpointName: "/readyz",
		Cache: node.CacheOptions(cfg.NodeName)})
	if err != nil {
		return err
	}
	if err := node.Setup(ctx, mgr, cfg, node.Deps{OVS: ovs, Metrics: metrics.Registry}); err != nil {
		return err
	}
	if chassisTLSDir != "" {
		r := &chassistls.Requester{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), OVS: ovs, Node: cfg.NodeName,
			Namespace: pkiNamespace, Dir: chassisTLSDir, Validity: ovnpki.DefaultChassisValidity, SignTimeout: time.Minute,
			Log: ctrl.Log.WithName("chassis-tls")}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { r.Run(ctx, chassisRecheck); return nil })); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}

// envOr is the environment variable's value, or def when it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
