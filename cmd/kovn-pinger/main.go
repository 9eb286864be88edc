// kovn-pinger checks, from a pod on every node, the paths pods depend on and exports what it
// measured (pkg/pinger): kovn's chart runs it as a DaemonSet on the pod network.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/kovn/kovn/pkg/annotation"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kovn/kovn/pkg/metricsauth"
	"github.com/kovn/kovn/pkg/pinger"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-pinger:", err)
		os.Exit(1)
	}
}

// options are kovn-pinger's flags that are not part of pinger.Config.
type options struct {
	namespace, export, kubeconfig, metricsAddr, localAddr, probeAddr string
	selector                                                         labels.Selector
	metricsSecure, getMetrics                                        bool
}

// parseFlags reads the command line into the pinger's config and the process's options.
func parseFlags() (pinger.Config, options, error) {
	cfg, o := pinger.Config{}, options{}
	flag.StringVar(&cfg.Node, "node-name", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	flag.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "kube-system"), "the pinger pods' namespace (env POD_NAMESPACE)")
	selector := flag.String("selector", "app=kovn-pinger", "the pinger pods' labels")
	flag.DurationVar(&cfg.Interval, "interval", 10*time.Second, "time between rounds")
	flag.IntVar(&cfg.Count, "count", 3, "probes per target and round")
	flag.DurationVar(&cfg.Timeout, "timeout", time.Second, "how long a probe waits for its answer")
	dns := flag.String("dns-names", "kubernetes.default.svc.cluster.local", "names to resolve each round, comma-separated")
	external := flag.String("external-addresses", "", "addresses outside the cluster to ping, comma-separated")
	flag.StringVar(&cfg.ClusterSetName, "clusterset-name", "", "the pinger pods' clusterset.local name (their exported headless Service): the other clusters' pingers are pinged too")
	flag.StringVar(&o.export, "export", "", "the pinger pods' headless Service to export to the clusterset (a ServiceExport is created when the CRD is there)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster)")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":9476", "Prometheus metrics address")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, metricsauth.FlagUsage)
	flag.StringVar(&o.localAddr, "metrics-local-address", "127.0.0.1:9486", "the metrics in plain HTTP on this pod's loopback, for --"+
		metricsauth.GetMetricsFlag+" (kubectl kovn runs it through pods/exec); empty: none")
	flag.BoolVar(&o.getMetrics, metricsauth.GetMetricsFlag, false, "print the metrics of the running pinger (--metrics-local-address) and exit")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":9477", "/livez and /readyz (after the first round) address, independent of metrics")
	flag.Parse()
	if o.getMetrics {
		return cfg, o, nil
	}
	if cfg.Node == "" {
		return cfg, o, errors.New("no node name: set --node-name or NODE_NAME")
	}
	if cfg.Count < 1 || cfg.Interval <= 0 || cfg.Timeout <= 0 {
		return cfg, o, errors.New("--count, --interval and --timeout must be positive")
	}
	var err error
	if o.selector, err = labels.Parse(*selector); err != nil {
		return cfg, o, fmt.Errorf("--selector: %w", err)
	}
	cfg.DNSNames = append(cfg.DNSNames, annotation.ParseList(*dns)...)
	for _, a := range annotation.ParseList(*external) {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return cfg, o, fmt.Errorf("--external-addresses: %q is no IP address", a)
		}
		cfg.External = append(cfg.External, ip)
	}
	if h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
		cfg.APIServer = net.JoinHostPort(h, p)
	}
	return cfg, o, nil
}

func run() error {
	cfg, o, err := parseFlags()
	if err != nil {
		return err
	}
	if o.getMetrics {
		return metricsauth.PrintLocal(o.localAddr)
	}
	restCfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	all := informers.NewSharedInformerFactory(kc, 10*time.Minute)
	nodes := all.Core().V1().Nodes().Lister()
	own := informers.NewSharedInformerFactoryWithOptions(kc, 10*time.Minute, informers.WithNamespace(o.namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = o.selector.String() }))
	pods := own.Core().V1().Pods().Lister()
	all.Start(ctx.Done())
	own.Start(ctx.Done())
	all.WaitForCacheSync(ctx.Done())
	own.WaitForCacheSync(ctx.Done())

	reg := prometheus.NewRegistry()
	m, err := pinger.NewMetrics(reg)
	if err != nil {
		return err
	}
	p := &pinger.Pinger{Cfg: cfg, Metrics: m,
		Nodes: func() []corev1.Node {
			list, _ := nodes.List(labels.Everything())
			return deref(list)
		},
		Pingers: func() []corev1.Pod {
			list, _ := pods.List(labels.Everything())
			return deref(list)
		}}
	servers, err := httpServers(reg, p, o, &metricsauth.Reviewer{Client: kc})
	if err != nil {
		return err
	}
	for _, s := range servers {
		go func() {
			if err := metricsauth.ListenAndServe(s); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "kovn-pinger:", s.Addr+":", err)
				stop()
			}
		}()
		defer s.Close()
	}
	if o.export != "" {
		go exportService(ctx, restCfg, o.namespace, o.export)
	}
	return p.Start(ctx)
}

// httpServers are the metrics servers (over TLS to the tokens r admits unless
// --metrics-secure=false; in plain HTTP on the pod's loopback for --get-metrics) and the probe
// server (/livez; /readyz once p finished a round).
func httpServers(reg *prometheus.Registry, p *pinger.Pinger, o options, r *metricsauth.Reviewer) ([]*http.Server, error) {
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	probeMux := http.NewServeMux()
	probeMux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	probeMux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if p.Rounds() == 0 {
			http.Error(w, "no round finished yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	metrics, err := metricsauth.Server(o.metricsAddr, metricsMux, o.metricsSecure, r)
	if err != nil {
		return nil, err
	}
	out := []*http.Server{metrics, {Addr: o.probeAddr, Handler: probeMux, ReadHeaderTimeout: 5 * time.Second}}
	if o.localAddr != "" {
		out = append(out, &http.Server{Addr: o.localAddr, Handler: metricsMux, ReadHeaderTimeout: 5 * time.Second})
	}
	return out, nil
}

// exportService creates the ServiceExport of the pinger pods' Service once mcs-api's CRD is
// served (kovn-controller installs it when the cluster joins a clusterset), retrying until then.
// Each new error is logged once (a missing CRD is expected until the cluster joins).
func exportService(ctx context.Context, cfg *rest.Config, namespace, name string) {
	last := ""
	for {
		err := ensureExport(ctx, cfg, namespace, name)
		if err == nil {
			fmt.Fprintf(os.Stderr, "kovn-pinger: ServiceExport %s/%s in place\n", namespace, name)
			return
		}
		if err.Error() != last {
			last = err.Error()
			fmt.Fprintf(os.Stderr, "kovn-pinger: exporting %s/%s (retrying every 30 s): %v\n", namespace, name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(30 * time.Second):
		}
	}
}

func ensureExport(ctx context.Context, cfg *rest.Config, namespace, name string) error {
	scheme := runtime.NewScheme()
	if err := mcsv1.Install(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	se := &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Create(ctx, se); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

func deref[T any](list []*T) []T {
	out := make([]T, 0, len(list))
	for _, o := range list {
		out = append(out, *o)
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
