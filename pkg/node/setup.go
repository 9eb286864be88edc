// Package node is kovn-daemon's node side, one subpackage per concern: bootstrap (the node's
// plumbing: chassis identity, ovn0, routes, CNI config), servicenat (SNAT, NodePorts,
// hostPorts), guard (datapath guards and health), podnet (the CNI's view of pod networks),
// mirror (traffic mirroring) and cleanup (uninstall). Setup wires them into a manager, as
// cluster.Setup does for kovn-controller.
package node

import (
	"context"
	"errors"
	"github.com/kovn/kovn/pkg/netattach"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cni"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/node/bootstrap"
	"github.com/kovn/kovn/pkg/node/guard"
	"github.com/kovn/kovn/pkg/node/mirror"
	"github.com/kovn/kovn/pkg/node/peerprobe"
	"github.com/kovn/kovn/pkg/node/podnet"
	"github.com/kovn/kovn/pkg/node/proxyhealth"
	"github.com/kovn/kovn/pkg/node/servicenat"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/underlay"
)

// Config is kovn-daemon's configuration of the node side (its flags).
type Config struct {
	bootstrap.Config
	// OVNControllerPidfile is where the gateway guard finds ovn-controller.
	OVNControllerPidfile string
	// OVSRunDir and VswitchdCtl are where the tunnel neighbour keeper finds ovs-vswitchd.
	OVSRunDir, VswitchdCtl string
	// CNIBinDir and StateDir are where attachment delegates are found and where the records
	// a CNI DEL needs to remove a container's attachments are kept.
	CNIBinDir, StateDir string
	// AttachmentNetworks: kovn-daemon plumbs the pods' attachment networks.
	AttachmentNetworks bool
	// Mirror and MirrorRemote are the node's traffic mirroring.
	Mirror       mirror.Mode
	MirrorRemote *mirror.Remote
	// MirrorNamespaces are the namespaces whose pods may ask for mirroring ("*": any).
	MirrorNamespaces []string
	// ProxyHealthzAddr is where kube-proxy's health port is answered ("" or "0": not at all).
	ProxyHealthzAddr string
	// ProxyStatusAddr is where kube-proxy's status port answers /proxyMode ("" or "0": not at all).
	ProxyStatusAddr string
	// ExternalIPCIDRs are the admin's ranges for Services' spec.externalIPs (kovn-controller's
	// flag must agree); empty: the node translates none.
	ExternalIPCIDRs []netip.Prefix
	// AttachmentHostInterfaces are the node interfaces attachment delegates may name
	// (kovn-controller's flag must agree).
	AttachmentHostInterfaces []string
}

// Deps are what Setup's runnables use besides the manager.
type Deps struct {
	OVS     libovsdb.Client       // the node's Open_vSwitch database
	Metrics prometheus.Registerer // where the node's health is exported
}

// CacheOptions caches only this node's pods, IP objects and Node object: the daemon's memory
// stays flat as the cluster grows.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:  {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
		&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
		&kovnv1.IP{}:   {Label: labels.SelectorFromSet(labels.Set{contract.LabelNode: nodeName})},
	}}
}

// Setup adds every node runnable and reconciler to mgr: the node's plumbing with its health
// checks, the datapath guards, Service NAT, the underlay, mirroring and the CNI server.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config, deps Deps) error {
	if cfg.NodeName == "" {
		return errors.New("no node name: set --node-name or NODE_NAME")
	}
	nr, err := setupBootstrap(mgr, cfg, deps)
	if err != nil {
		return err
	}
	if err := setupGuards(ctx, mgr, cfg, deps, nr.Ready); err != nil {
		return err
	}
	c := mgr.GetClient()
	// Healthy for a minute from the start, then only once the Services are programmed.
	tracker := proxyhealth.NewTracker(proxyhealth.DefaultTimeout)
	tracker.Queued()
	checks := &proxyhealth.HealthCheckPorts{Tracker: tracker}
	if err := setupProxyHealth(mgr, cfg, tracker, checks); err != nil {
		return err
	}
	nodes, err := servicenat.NodeAddressCache(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	if err := mgr.Add(nodes); err != nil {
		return err
	}
	ul := &underlay.Reconciler{Client: c, OVS: deps.OVS, NodeName: cfg.NodeName, Integration: cfg.Bridge,
		Recorder: mgr.GetEventRecorderFor("kovn-daemon")}
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		ul,
		&servicenat.NodePortReconciler{Client: c, NodeName: cfg.NodeName, JoinSubnet: cfg.JoinSubnet, Nodes: nodes, Health: tracker, HealthChecks: checks,
			ExternalIPCIDRs: cfg.ExternalIPCIDRs, ServiceCIDRs: cfg.ServiceCIDRs},
		&mirror.Reconciler{Client: c, OVS: deps.OVS, Bridge: cfg.Bridge, Mode: cfg.Mirror, Namespaces: cfg.MirrorNamespaces, Remote: cfg.MirrorRemote},
		&servicenat.HostPortReconciler{Client: c, NodeName: cfg.NodeName, JoinSubnet: cfg.JoinSubnet},
		&peerprobe.Reconciler{Client: c, OVS: deps.OVS, NodeName: cfg.NodeName, Integration: cfg.Bridge},
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	return setupCNI(mgr, cfg, deps, ul)
}

// setupProxyHealth serves kube-proxy's health port and closes the health check node ports at
// shutdown. A port already taken (kube-proxy still running) is logged, not fatal: the node's
// networking does not depend on it.
func setupProxyHealth(mgr ctrl.Manager, cfg Config, tracker *proxyhealth.Tracker, checks *proxyhealth.HealthCheckPorts) error {
	closeChecks := manager.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); checks.Close(); return nil })
	if err := mgr.Add(closeChecks); err != nil {
		return err
	}
	if err := serveHTTP(mgr, cfg.ProxyStatusAddr, proxyhealth.StatusHandler(), "the proxy status port"); err != nil {
		return err
	}
	eligible := func() bool { // kube-proxy's: not while the node is being deleted
		var n corev1.Node
		if err := mgr.GetClient().Get(context.Background(), client.ObjectKey{Name: cfg.NodeName}, &n); err != nil {
			return true
		}
		return n.DeletionTimestamp == nil && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "ToBeDeletedByClusterAutoscaler" })
	}
	return serveHTTP(mgr, cfg.ProxyHealthzAddr, tracker.Handler(eligible), "the proxy health port")
}

// serveHTTP serves handler on addr ("" or "0": not at all) while the manager runs; an address
// already taken is logged, not fatal.
func serveHTTP(mgr ctrl.Manager, addr string, handler http.Handler, what string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			ctrl.Log.Error(err, what+" is not served", "address", addr)
			<-ctx.Done()
			return nil
		}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}))
}

// setupBootstrap adds the node's plumbing, the ovn0 watch that re-syncs it, and the health
// checks: live while the process serves, ready once the node accepts pods (the CNI config is
// written).
func setupBootstrap(mgr ctrl.Manager, cfg Config, deps Deps) (*bootstrap.Reconciler, error) {
	nr := &bootstrap.Reconciler{Client: mgr.GetClient(), OVS: deps.OVS, Cfg: cfg.Config, Recorder: mgr.GetEventRecorderFor("kovn-daemon"),
		Ovn0Events: make(chan event.GenericEvent, 1), SyncNAT: servicenat.SyncNAT}
	if err := nr.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := errors.Join(mgr.AddHealthzCheck("livez", healthz.Ping), mgr.AddReadyzCheck("readyz", func(*http.Request) error {
		if !nr.Ready() {
			return errors.New("the node is not plumbed yet: no CNI config written")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	watch := manager.RunnableFunc(func(ctx context.Context) error { return bootstrap.WatchOvn0(ctx, nr.Ovn0Events) })
	return nr, mgr.Add(watch)
}

// setupGuards adds the node's health (metrics and the Node condition) and the datapath guards;
// the userspace datapath's own guards only with --netdev.
func setupGuards(ctx context.Context, mgr ctrl.Manager, cfg Config, deps Deps, plumbed func() bool) error {
	health := &guard.NodeHealth{OVS: ovn.WatchLiveness(ctx, deps.OVS, 0), VswitchdCtl: cfg.VswitchdCtl,
		OVNControllerPidfile: cfg.OVNControllerPidfile, OVSClient: deps.OVS, OVSRunDir: cfg.OVSRunDir, IntegrationBridge: cfg.Bridge}
	if err := health.Register(deps.Metrics); err != nil {
		return err
	}
	runnables := []manager.Runnable{
		&guard.NodeConditionReporter{Client: mgr.GetClient(), NodeName: cfg.NodeName, Health: health, Plumbed: plumbed},
		&guard.GatewayGuard{OVS: deps.OVS, PidFile: cfg.OVNControllerPidfile, Subnets: mgr.GetClient(), NodeName: cfg.NodeName},
	}
	if cfg.Netdev {
		vswitchd := guard.VswitchdSocket{Ctl: cfg.VswitchdCtl, RunDir: cfg.OVSRunDir}
		runnables = append(runnables, &guard.ZeroSNATGuard{OVS: deps.OVS}, &guard.TunnelNeighbours{OVS: deps.OVS, Socket: vswitchd})
		sweeper := &guard.StaleUDPSweeper{Client: mgr.GetClient(), Socket: vswitchd}
		if err := sweeper.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return nil
}

// setupCNI adds the CNI server on cfg.CNISocket, answering from the pods' networks as the
// controller recorded them, and the collector of ports whose pods are gone.
func setupCNI(mgr ctrl.Manager, cfg Config, deps Deps, ul *underlay.Reconciler) error {
	ports := cni.NewOVSAttacher(deps.OVS, cfg.Bridge)
	handler := cni.NewPodHandler(&podnet.PodNetworks{Client: mgr.GetClient(), NodeName: cfg.NodeName, MTU: cfg.MTU, Underlay: ul,
		Live: mgr.GetAPIReader(), IgnoreAttachments: !cfg.AttachmentNetworks,
		Delegates: netattach.AllowingHostInterfaces(cfg.AttachmentHostInterfaces...)}, ports)
	handler.Log = ctrl.Log.WithName("cni")
	handler.CNIBinDir, handler.StateDir = cfg.CNIBinDir, cfg.StateDir
	handler.Status = &podnet.NetworkStatusPublisher{Client: mgr.GetClient()}
	srv := cni.NewServer(cfg.CNISocket, handler)
	srv.Log = ctrl.Log.WithName("cni-server")
	srv.Observe = (&podnet.CNIObserver{Pods: mgr.GetClient()}).Observe
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return srv.Serve(ctx) })); err != nil {
		return err
	}
	return mgr.Add(&guard.PortGC{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), OVS: deps.OVS, Ports: ports})
}
