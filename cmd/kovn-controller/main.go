// Command kovn-controller reconciles Kubernetes and kovn objects into OVN: IPAM, VPC router,
// subnet switches, pod and node ports, gateway policies. Leader-elected; run one per cluster
// (more for HA).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	aboutv1 "github.com/kovn/kovn/api/about/v1beta1"
	mnpv1 "github.com/kovn/kovn/api/mnp/v1beta1"
	nadv1 "github.com/kovn/kovn/api/nad/v1"
	policyv1 "github.com/kovn/kovn/api/policy/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/ovnpki"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/interconnect"
	"github.com/kovn/kovn/pkg/interconnect/ictls"
	"github.com/kovn/kovn/pkg/interconnect/mcs"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
	"github.com/kovn/kovn/pkg/metricsauth"
	"github.com/kovn/kovn/pkg/ovn"
)

var (
	apiQPS   float64
	apiBurst int
	sbAddr   string
	// namespace is kovn's own: the clusterset TLS Secret lives there.
	namespace string
	// metricsSecure: metrics over TLS to reviewed tokens only (metricsauth).
	metricsSecure bool
	// aclLogRate caps ACL log lines per second and node (the ACL log meter's rate).
	aclLogRate = 20
	// ovnPKI makes kovn-controller the cluster's OVN certificate authority (package ovnpki).
	ovnPKI        bool
	ovnCentralIPs string
	// ovnTLSDir holds a client certificate for ssl: NB and SB endpoints (before --ovn-pki's).
	ovnTLSDir      string
	ovnCertLife    time.Duration
	ovnCAStep      time.Duration
	daemonSAccount string
	// ovnCreds is kovn-controller's own OVN client certificate, with ovnPKI.
	ovnCreds *ovn.Credentials
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		os.Exit(uninstallMain(os.Args[2:]))
	}
	opts := cluster.DefaultOptions()
	nbAddr := flag.String("ovn-nb-addr", os.Getenv("OVN_NB_DB"), "OVN northbound endpoints: tcp:IP:PORT, ssl:IP:PORT or unix:PATH, comma-separated")
	flag.StringVar(&sbAddr, "ovn-sb-addr", os.Getenv("OVN_SB_DB"), "OVN southbound endpoints, comma-separated: centralized subnet gateways then fail over on OVN's gateway health (BFD) instead of Node readiness, and a failed interconnect gateway is held back until its ovn-controller is in step again")
	leaderElect := flag.Bool("leader-elect", true, "elect one active controller among replicas")
	leNamespace := flag.String("leader-election-namespace", "kube-system", "namespace of the leader election lease")
	flag.StringVar(&namespace, "namespace", envOr("POD_NAMESPACE", "kube-system"), "kovn's namespace: where the InterConnect's TLS Secret is (env POD_NAMESPACE)")
	metricsAddr := flag.String("metrics-bind-address", "0", "metrics listen address (0 disables)")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, metricsauth.FlagUsage)
	probeAddr := flag.String("health-probe-bind-address", "0", "health probe listen address (0 disables)")
	flag.StringVar(&opts.DefaultSubnetCIDR, "default-cidr", opts.DefaultSubnetCIDR, "CIDR of the default subnet")
	flag.StringVar(&opts.JoinCIDR, "join-cidr", opts.JoinCIDR, "CIDR of the join subnet (node ovn0 addresses)")
	flag.BoolVar(&opts.AttachmentNetworks, "attachment-networks", opts.AttachmentNetworks,
		"serve the pods' k8s.v1.cni.cncf.io/networks (NPWG attachment networks); false when a meta-plugin such as Multus serves them and kovn is the default network only (kovn-daemon's flag must agree)")
	// Each new pod costs two writes (IP object, annotations). By default there is no client-side
	// limit (controller-runtime's -1): the apiserver's API Priority and Fairness paces us, and a
	// cold start with ten thousand pods is not throttled to a fixed rate.
	flag.Float64Var(&apiQPS, "kube-api-qps", -1, "queries per second to the Kubernetes API (-1: no client-side limit)")
	flag.IntVar(&apiBurst, "kube-api-burst", 0, "burst of queries to the Kubernetes API (with --kube-api-qps > 0)")
	flag.BoolVar(&ovnPKI, "ovn-pki", false, "be the cluster's OVN certificate authority: keep the CAs and OVN central's certificate in kovn's namespace (Secrets "+
		ovnpki.CentralCASecret+", "+ovnpki.ChassisCASecret+", "+ovnpki.CentralSecret+"), sign the nodes' chassis CSRs (signer "+ovnpki.SignerName+
		") and connect to NB and SB with a certificate of its own")
	flag.StringVar(&ovnTLSDir, "ovn-tls-dir", "", "directory with the client certificate for ssl: NB and SB endpoints (tls.crt, tls.key, ca.crt, as a mounted kubernetes.io/tls Secret), read again when they change; used instead of --ovn-pki's own")
	flag.StringVar(&ovnCentralIPs, "ovn-central-addresses", "", "with --ovn-pki: the addresses of the OVN central nodes, comma-separated (named in their certificate)")
	flag.DurationVar(&ovnCertLife, "ovn-cert-validity", ovnpki.DefaultCertValidity, "with --ovn-pki: lifetime of the certificates issued; each is renewed at half of it")
	flag.DurationVar(&ovnCAStep, "ovn-ca-rotation-step", ovnpki.DefaultRotationStep, "with --ovn-pki: how long each step of a CA rotation is held "+
		"(trust the next CA, issue from it, retire the previous); longer than the kubelet takes to update a Secret volume")
	flag.StringVar(&daemonSAccount, "daemon-service-account", "kovn-daemon", "with --ovn-pki: kovn-daemon's ServiceAccount in --namespace, the only requester of chassis certificates")
	hostIfaces := flag.String("attachment-host-interfaces", "", "comma-separated node interfaces attachment delegates may name (macvlan/ipvlan master, host-device device, "+
		"bridge name; kovn-daemon's flag must agree); empty: none")
	externalIPCIDRs := flag.String("external-ip-cidrs", "", "comma-separated ranges a Service's spec.externalIPs may come from "+
		"(kovn-daemon's flag must agree); empty: no external IP is honoured. Never the cluster's own ranges, a node, a ClusterIP or another Service's")
	zapOpts := zap.Options{}
	flag.IntVar(&aclLogRate, "acl-log-rate", aclLogRate, "ACL log lines per second and node at most, for the admin's Subnet ACLs (OVN meter "+topology.ACLLogMeter+") and for each namespace's NetworkPolicies (a meter per namespace); the rest are not logged")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	opts.AttachmentHostInterfaces = annotation.ParseList(*hostIfaces)
	opts.ACLLogRate = aclLogRate
	if *externalIPCIDRs != "" {
		var err error
		if opts.ExternalIPCIDRs, err = annotation.ParsePrefixes(*externalIPCIDRs); err != nil {
			fmt.Fprintf(os.Stderr, "kovn-controller: --external-ip-cidrs %q: %v\n", *externalIPCIDRs, err)
			os.Exit(2)
		}
	}
	if aclLogRate < 1 {
		fmt.Fprintf(os.Stderr, "kovn-controller: --acl-log-rate must be at least 1, not %d\n", aclLogRate)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := run(opts, *nbAddr, *leaderElect, *leNamespace, *metricsAddr, *probeAddr); err != nil {
		fmt.Fprintln(os.Stderr, "kovn-controller:", err)
		os.Exit(1)
	}
}

func run(opts cluster.Options, nbAddr string, leaderElect bool, leNamespace, metricsAddr, probeAddr string) error {
	if nbAddr == "" {
		return fmt.Errorf("no OVN northbound address: set --ovn-nb-addr or OVN_NB_DB")
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kovnv1.AddToScheme, nadv1.AddToScheme, apiextv1.AddToScheme, mcsv1.Install, aboutv1.AddToScheme, policyv1.AddToScheme, mnpv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	if apiQPS != -1 {
		cfg.QPS, cfg.Burst = float32(apiQPS), apiBurst
	}
	ctx := ctrl.SetupSignalHandler()
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := cluster.RequireCRDs(setupCtx, direct); err != nil {
		return err
	}
	pki, err := startPKI(setupCtx, direct)
	if err != nil {
		return err
	}
	nb, err := ovn.ConnectNB(setupCtx, ovn.Config{Endpoints: ovn.SplitEndpoints(nbAddr), Logger: ctrl.Log.WithName("nb"), Credentials: credentialSource()})
	if err != nil {
		return err
	}
	nbLive := ovn.WatchLiveness(ctx, nb, 0)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, LeaderElection: leaderElect,
		LeaderElectionID: "kovn-controller", LeaderElectionNamespace: leNamespace,
		Metrics: metricsauth.ServerOptions(metricsAddr, metricsSecure), HealthProbeBindAddress: probeAddr,
		LivenessEndpointName: "/livez", ReadinessEndpointName: "/readyz"})
	if err != nil {
		return err
	}
	_ = mgr.AddHealthzCheck("ping", healthz.Ping)
	// Ready while the northbound database is reachable (a standby replica too: it can take over).
	_ = mgr.AddReadyzCheck("nb", func(*http.Request) error {
		if !nbLive.Answers() {
			return errors.New("the OVN northbound database does not answer")
		}
		return nil
	})
	if err := addPKI(mgr, pki); err != nil {
		return err
	}
	st := cluster.NewState(opts)
	if err := mgr.Add(leaderInit(direct, nb, st, opts)); err != nil {
		return err
	}
	if err := setupControllers(mgr, st, nb, nbLive); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// leaderInit runs once this replica leads: defaults, then the IPAM rebuilt from the API, then
// the gate the reconcilers wait on opens.
func leaderInit(direct client.Client, nb libovsdb.Client, st *cluster.State, opts cluster.Options) manager.RunnableFunc {
	return func(ctx context.Context) error {
		if err := cluster.EnsureDefaults(ctx, direct, opts); err != nil {
			return err
		}
		if err := cluster.EnsureGatewayBFD(ctx, nb); err != nil {
			return fmt.Errorf("gateway BFD timers in NB_Global: %w", err)
		}
		if _, err := nbsync.Apply(ctx, nb, topology.ForACLLogMeter(aclLogRate)); err != nil {
			return fmt.Errorf("ACL log meter: %w", err)
		}
		if err := cluster.Restore(ctx, direct, st); err != nil {
			return fmt.Errorf("restore IPAM: %w", err)
		}
		st.MarkRestored()
		ctrl.Log.Info("IPAM restored from the API; reconciling")
		pods := &cluster.PodReconciler{Client: direct, State: st}
		if err := pods.CollectOrphans(ctx); err != nil {
			ctrl.Log.Error(err, "collecting addresses of pods deleted while the controller was down")
		}
		<-ctx.Done()
		return nil
	}
}

// setupControllers wires the single-cluster reconcilers, the interconnect and MCS into mgr,
// with the OVSDB connection metrics.
func setupControllers(mgr manager.Manager, st *cluster.State, nb libovsdb.Client, nbLive *ovn.Liveness) error {
	var sbEndpoints []string
	if sbAddr != "" {
		sbEndpoints = ovn.SplitEndpoints(sbAddr)
	}
	health := cluster.NewGatewayHealth(sbEndpoints)
	health.NB, health.Credentials = nb, credentialSource()
	if err := cluster.RegisterOVSDBConnected(metrics.Registry, "nb", nbLive.Answers); err != nil {
		return err
	}
	if len(sbEndpoints) > 0 {
		if err := cluster.RegisterOVSDBConnected(metrics.Registry, "sb", health.Connected); err != nil {
			return err
		}
		// A standby moves a centralized subnet's egress from SB's gateway health when the
		// leader's node fails: without SB it could not, so it is not ready to stand by.
		_ = mgr.AddReadyzCheck("sb", func(*http.Request) error {
			if !health.Connected() {
				return errors.New("the OVN southbound database does not answer")
			}
			return nil
		})
	}
	// Read with the uncached reader: kovn-controller may get that one Secret, not list Secrets.
	icTLS := &ictls.Loader{Reader: mgr.GetAPIReader(), Namespace: namespace, Creds: &ovn.Credentials{}}
	set := mcs.NewClusterset(icTLS)
	// Policies select the other clusters' published pods through the clusterset store; the
	// Services leave out the imported endpoints of clusters the gateways' probes find cut off.
	peerHealth := interconnect.NewPeerHealth()
	if err := cluster.Setup(mgr, st, nb, health, set.Peers(), peerHealth); err != nil {
		return err
	}
	if err := (&interconnect.PeerHealthReconciler{Client: mgr.GetClient(), Health: peerHealth,
		Recorder: mgr.GetEventRecorderFor("kovn-interconnect")}).SetupWithManager(mgr); err != nil {
		return err
	}
	// One record of repairs to this AZ's rows in the clusterset's databases, for Degraded.
	tampering := &tamper.Log{}
	icr := &interconnect.Reconciler{Client: mgr.GetClient(), State: st, NB: nb, Health: health,
		Recorder: mgr.GetEventRecorderFor("kovn-interconnect"), TLS: icTLS, Tamper: tampering, Peers: set.Peers()}
	if err := icr.SetupWithManager(mgr); err != nil {
		return err
	}
	tampering.OnNote = icr.Wake
	set.Peers().OnCurrentChange(icr.Wake) // ClustersetPeersCurrent follows the store
	if err := icr.RegisterMetrics(metrics.Registry); err != nil {
		return err
	}
	set.Tamper = tampering
	if err := mcs.Setup(mgr, set); err != nil {
		return err
	}
	return mcs.RegisterMetrics(metrics.Registry, mgr.GetClient())
}

// envOr is the environment variable's value, or def when it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
