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
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/node"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/underlay"
)

// ovnControllerPidfile is where the gateway guard finds ovn-controller.
var ovnControllerPidfile string

// ovsRun and vswitchdCtl are where the tunnel neighbour keeper finds ovs-vswitchd.
var ovsRun, vswitchdCtl string

// cniBinDir and stateDir are where attachment delegates are found and where the records
// DEL needs to remove a container's attachments are kept.
var cniBinDir, stateDir string

// attachmentNetworks: kovn-daemon plumbs the pods' attachment networks (--attachment-networks).
var attachmentNetworks = true

// metricsAddr and probeAddr are the metrics and health probe listen addresses.
var metricsAddr, probeAddr string

// mirrorMode and mirrorRemote are the node's traffic mirroring (--mirror, --mirror-remote).
var (
	mirrorMode   node.MirrorMode
	mirrorRemote *node.MirrorRemote
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "cleanup-node" {
		os.Exit(cleanupNode(os.Args[2:]))
	}
	cfg := node.Config{Bridge: "br-int", JoinSubnet: "join"}
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
	flag.StringVar(&ovnControllerPidfile, "ovn-controller-pidfile", filepath.Join(ovnRun, "ovn-controller.pid"),
		"ovn-controller's pidfile: on an interconnect gateway, its death turns BFD off so the peers fail over")
	if ovsRun = os.Getenv("OVS_RUNDIR"); ovsRun == "" {
		ovsRun = "/var/run/openvswitch"
	}
	flag.StringVar(&vswitchdCtl, "ovs-vswitchd-ctl", "", "ovs-vswitchd's control socket (default: ovs-vswitchd.<pid>.ctl in $OVS_RUNDIR or /var/run/openvswitch); with --netdev, kovn-daemon keeps its tunnel neighbour cache")
	flag.StringVar(&cniBinDir, "cni-bin-dir", "/opt/cni/bin", "where the delegate plugins of attachment networks are (macvlan, ipvlan, bridge, host-device, static)")
	flag.StringVar(&stateDir, "state-dir", "/run/kovn", "kovn-daemon's state: the records a CNI DEL needs to remove a pod's attachments")
	flag.BoolVar(&attachmentNetworks, "attachment-networks", true,
		"plumb the pods' k8s.v1.cni.cncf.io/networks (NPWG attachment networks); false when a meta-plugin such as Multus does and calls kovn-cni for eth0 only (kovn-controller's flag must agree)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":9474", "Prometheus metrics address (0 turns them off)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":9475", "/livez and /readyz address, independent of metrics (0 turns them off)")
	serviceCIDRs := flag.String("service-cidrs", "", "the cluster's Service ranges, comma-separated (kube-apiserver --service-cluster-ip-range): routed through ovn0 so the node reaches ClusterIPs")
	mirror := flag.String("mirror", string(node.MirrorAnnotated), "traffic mirroring to the node's mirror0: off, annotated (pods annotated ovn.kovn.io/mirror=true) or all (every pod of the node)")
	remote := flag.String("mirror-remote", "", "also send mirrored traffic to a collector: gre:IP[:KEY] or erspan:IP[:INDEX]")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	var err error
	if mirrorMode, err = node.ParseMirrorMode(*mirror); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon: --mirror:", err)
		os.Exit(2)
	}
	if mirrorRemote, err = node.ParseMirrorRemote(*remote); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon: --mirror-remote:", err)
		os.Exit(2)
	}
	if *serviceCIDRs != "" {
		if cfg.ServiceCIDRs, err = annotation.ParsePrefixes(*serviceCIDRs); err != nil {
			fmt.Fprintf(os.Stderr, "kovn-daemon: --service-cidrs %q: %v\n", *serviceCIDRs, err)
			os.Exit(2)
		}
	}
	if err := run(cfg, *ovsDB); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon:", err)
		os.Exit(1)
	}
}

// cleanupNode is the cleanup-node subcommand: it removes kovn's state from this node, printing
// one line per item, and returns the exit code (1 if any item failed, 2 on bad flags).
func cleanupNode(args []string) int {
	fs := flag.NewFlagSet("kovn-daemon cleanup-node", flag.ContinueOnError)
	opts := node.CleanupOptions{Out: os.Stdout}
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
	rep, err := node.CleanupNode(ctx, opts)
	fmt.Printf("kovn-daemon cleanup-node: %d removed, %d left, %d failed\n", len(rep.Removed), len(rep.Left), len(rep.Failed))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kovn-daemon cleanup-node:", err)
		return 1
	}
	return 0
}

func run(cfg node.Config, ovsDB string) error {
	if cfg.NodeName == "" {
		return errors.New("no node name: set --node-name or NODE_NAME")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := kovnv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := nadv1.AddToScheme(scheme); err != nil {
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
	// Only this node's pods, IP objects and Node object are cached: memory stays flat as the
	// cluster grows.
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr, LivenessEndpointName: "/livez", ReadinessEndpointName: "/readyz",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Field: fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName)},
			&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", cfg.NodeName)},
			&kovnv1.IP{}:   {Label: labels.SelectorFromSet(labels.Set{contract.LabelNode: cfg.NodeName})},
		}}})
	if err != nil {
		return err
	}
	nr := &node.Reconciler{Client: mgr.GetClient(), OVS: ovs, Cfg: cfg, Recorder: mgr.GetEventRecorderFor("kovn-daemon"),
		Ovn0Events: make(chan event.GenericEvent, 1)}
	if err := nr.SetupWithManager(mgr); err != nil {
		return err
	}
	// Live while the process serves; ready once the node accepts pods (the CNI config is written).
	if err := errors.Join(mgr.AddHealthzCheck("livez", healthz.Ping), mgr.AddReadyzCheck("readyz", func(*http.Request) error {
		if !nr.Ready() {
			return errors.New("the node is not plumbed yet: no CNI config written")
		}
		return nil
	})); err != nil {
		return err
	}
	health := &node.NodeHealth{OVS: ovn.WatchLiveness(ctx, ovs, 0), VswitchdCtl: vswitchdCtl, OVNControllerPidfile: ovnControllerPidfile,
		OVSClient: ovs, OVSRunDir: ovsRun, IntegrationBridge: cfg.Bridge}
	if err := health.Register(metrics.Registry); err != nil {
		return err
	}
	if err := mgr.Add(&node.NodeConditionReporter{Client: mgr.GetClient(), NodeName: cfg.NodeName, Health: health, Plumbed: nr.Ready}); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return node.WatchOvn0(ctx, nr.Ovn0Events) })); err != nil {
		return err
	}
	if err := mgr.Add(&node.GatewayGuard{OVS: ovs, PidFile: ovnControllerPidfile, Subnets: mgr.GetClient(), NodeName: cfg.NodeName}); err != nil {
		return err
	}
	if cfg.Netdev {
		if err := mgr.Add(&node.ZeroSNATGuard{OVS: ovs}); err != nil {
			return err
		}
		vswitchd := node.VswitchdSocket{Ctl: vswitchdCtl, RunDir: ovsRun}
		if err := mgr.Add(&node.TunnelNeighbours{OVS: ovs, Socket: vswitchd}); err != nil {
			return err
		}
		sweeper := &node.StaleUDPSweeper{Client: mgr.GetClient(), Socket: vswitchd}
		if err := sweeper.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	ul := &underlay.Reconciler{Client: mgr.GetClient(), OVS: ovs, NodeName: cfg.NodeName, Integration: cfg.Bridge,
		Recorder: mgr.GetEventRecorderFor("kovn-daemon")}
	if err := ul.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&node.NodePortReconciler{Client: mgr.GetClient(), NodeName: cfg.NodeName}).SetupWithManager(mgr); err != nil {
		return err
	}
	mirrors := &node.MirrorReconciler{Client: mgr.GetClient(), OVS: ovs, Bridge: cfg.Bridge, Mode: mirrorMode, Remote: mirrorRemote}
	if err := mirrors.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&node.HostPortReconciler{Client: mgr.GetClient(), NodeName: cfg.NodeName, JoinSubnet: cfg.JoinSubnet}).SetupWithManager(mgr); err != nil {
		return err
	}
	ports := cni.NewOVSAttacher(ovs, cfg.Bridge)
	handler := cni.NewPodHandler(&node.PodNetworks{Client: mgr.GetClient(), NodeName: cfg.NodeName, MTU: cfg.MTU, Underlay: ul,
		Live: mgr.GetAPIReader(), IgnoreAttachments: !attachmentNetworks}, ports)
	handler.Log = ctrl.Log.WithName("cni")
	handler.CNIBinDir, handler.StateDir = cniBinDir, stateDir
	handler.Status = &node.NetworkStatusPublisher{Client: mgr.GetClient()}
	srv := cni.NewServer(cfg.CNISocket, handler)
	srv.Log = ctrl.Log.WithName("cni-server")
	srv.Observe = (&node.CNIObserver{Pods: mgr.GetClient()}).Observe
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return srv.Serve(ctx) })); err != nil {
		return err
	}
	if err := mgr.Add(&node.PortGC{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), OVS: ovs, Ports: ports}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
