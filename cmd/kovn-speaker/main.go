// kovn-speaker announces the addresses of subnets, pods and Services marked for BGP to the
// node's BGP peers (BgpPeer objects), from an embedded GoBGP. One runs on each speaker node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/bgp"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/metricsauth"
)

// restartWindow: a marker younger than this means the previous speaker did not leave cleanly
// moments ago, so this start is a graceful restart (GoBGP's restart time is at most 4095 s).
const restartWindow = time.Hour

type config struct {
	node, namespace, stateDir string
	externalIPCIDRs           []netip.Prefix
	metricsAddr, healthAddr   string
	metricsSecure             bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.node, "node-name", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	flag.StringVar(&cfg.namespace, "secrets-namespace", bgp.SecretsNamespace, "where BgpPeer password Secrets live; the speaker reads Secrets of this namespace only")
	flag.StringVar(&cfg.stateDir, "state-dir", "/run/kovn", "where the speaker records that it is running, to tell a restart from a first start")
	external := flag.String("external-ip-cidrs", "", "comma-separated ranges a Service's spec.externalIPs may be announced from (others are never announced)")
	flag.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":9472", "Prometheus metrics address (0 turns them off)")
	flag.BoolVar(&cfg.metricsSecure, "metrics-secure", true, metricsauth.FlagUsage)
	flag.StringVar(&cfg.healthAddr, "health-probe-bind-address", ":9473", "/livez and /readyz address (0 turns them off)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	for _, s := range strings.Split(*external, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kovn-speaker: --external-ip-cidrs: %v\n", err)
			os.Exit(2)
		}
		cfg.externalIPCIDRs = append(cfg.externalIPCIDRs, p.Masked())
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-speaker:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	if cfg.node == "" {
		return errors.New("no node name: set --node-name or NODE_NAME")
	}
	log := ctrl.Log.WithName("speaker")
	marker := filepath.Join(cfg.stateDir, "kovn-speaker.running")
	restarting := false
	if fi, err := os.Stat(marker); err == nil && time.Since(fi.ModTime()) < restartWindow {
		restarting = true
	}
	if err := os.MkdirAll(cfg.stateDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	log.Info("starting", "node", cfg.node, "gracefulRestart", restarting)
	sp := bgp.NewGoBGP(log.WithName("gobgp"), restarting)

	mgr, err := newManager(cfg)
	if err != nil {
		return err
	}
	r := &bgp.Reconciler{Client: mgr.GetClient(), Node: cfg.node, Namespace: cfg.namespace,
		ExternalIPCIDRs: cfg.externalIPCIDRs, Speaker: sp}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(&bgp.StatusWriter{Client: mgr.GetClient(), Node: cfg.node, Speaker: sp, Reconciler: r,
		Recorder: mgr.GetEventRecorderFor("kovn-speaker")}); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return bgp.WatchAddresses(ctx, sp, log) })); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("livez", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	runErr := mgr.Start(ctrl.SetupSignalHandler())
	return errors.Join(runErr, shutdown(sp, r, marker))
}

// newManager caches only what this node needs: its own Node, pods (metadata) and IP objects,
// and the Secrets of the BGP secrets namespace.
func newManager(cfg config) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := kovnv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	return ctrl.NewManager(restCfg, ctrl.Options{Scheme: scheme,
		Metrics:                metricsauth.ServerOptions(cfg.metricsAddr, cfg.metricsSecure),
		HealthProbeBindAddress: cfg.healthAddr, LivenessEndpointName: "/livez", ReadinessEndpointName: "/readyz",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:    {Field: fields.OneTermEqualSelector("spec.nodeName", cfg.node)},
			&corev1.Node{}:   {Field: fields.OneTermEqualSelector("metadata.name", cfg.node)},
			&kovnv1.IP{}:     {Label: labels.SelectorFromSet(labels.Set{contract.LabelNode: cfg.node})},
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{cfg.namespace: {}}},
		}}})
}

// shutdown ends BGP. With graceful restart on any session the speaker leaves without a
// NOTIFICATION and keeps its marker: the peers keep forwarding to this node until it is back
// (or their restart timer ends). Otherwise every route is withdrawn, the sessions are closed
// cleanly, and the marker goes: the next start is a first start.
func shutdown(sp *bgp.GoBGP, r *bgp.Reconciler, marker string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	plan, _ := r.Plan()
	for _, p := range plan.Peers {
		if p.GracefulRestart {
			ctrl.Log.Info("leaving under graceful restart: routes stay with the peers until the restart timer ends")
			return sp.Stop(ctx, false)
		}
	}
	err := sp.Stop(ctx, true)
	if rmErr := os.Remove(marker); rmErr != nil && !os.IsNotExist(rmErr) {
		err = errors.Join(err, rmErr)
	}
	return err
}
