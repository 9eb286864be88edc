package bootstrap

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/nodecond"
)

// Config is kovn-daemon's node configuration.
type Config struct {
	NodeName   string
	Bridge     string // br-int
	MTU        int
	CNIConfDir string
	CNISocket  string
	JoinSubnet string
	OVNRemote  string // southbound DB for ovn-controller; empty: leave what is configured
	Netdev     bool   // userspace OVS datapath
	// ServiceCIDRs are the cluster's Service ranges: routed through ovn0 like pod subnets, so
	// the node's host network (kubelet, hostNetwork pods) reaches ClusterIPs through OVN's
	// load balancers on the join switch.
	ServiceCIDRs []netip.Prefix
}

// Reconciler keeps the node plumbed: chassis identity, ovn0, routes to every valid subnet,
// SNAT for natOutgoing subnets, forwarding and the CNI config. Each is a Step of its own
// (node_steps.go): a failure is retried with backoff and reported as an event on the Node,
// and withholds only the steps that truly need it.
type Reconciler struct {
	client.Client
	OVS libovsdb.Client
	Cfg Config
	// Recorder reports step failures and recoveries as events on the Node; nil: logs only.
	Recorder record.EventRecorder

	// Ovn0Events, when set, re-syncs the node on each event (WatchOvn0 feeds it).
	Ovn0Events chan event.GenericEvent
	// SyncNAT writes the node's SNAT for natOutgoing subnets (servicenat.SyncNAT); the SNAT
	// step fails while it is nil. It is handed in because Service NAT builds on this
	// package's plumbing (ovn0, the node's subnets), not the other way round.
	SyncNAT func(natCIDRs, clusterCIDRs []netip.Prefix) error

	runner StepRunner
	ops    *nodeOps // nil: the real side effects
}

// Ready reports whether the CNI config is in place, i.e. the node accepts pods.
func (r *Reconciler) Ready() bool { return r.runner.OK(StepCNIConfig) }

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kovn.io,resources=subnets,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler; every request means "sync this node". Step
// errors are not returned: each step keeps its own backoff, and the earliest retry is the
// requeue; a healthy node resyncs every minute.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: r.Cfg.NodeName}, &node); err != nil {
		return ctrl.Result{}, err
	}
	if r.ops == nil {
		r.ops = r.realOps()
	}
	p := &pass{r: r, node: &node}
	retry := r.runner.Run(ctx, p.steps(), func(rep StepReport) { r.report(ctx, &node, rep) })
	if retry == 0 {
		retry = time.Minute
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

func joinConfig(n *corev1.Node, mtu int) (JoinConfig, bool, error) {
	a := n.Annotations
	if a[annotation.JoinIP] == "" || a[annotation.JoinMAC] == "" || a[annotation.JoinCIDR] == "" || a[annotation.JoinGateway] == "" {
		return JoinConfig{}, false, nil
	}
	ips, err := annotation.ParseAddrs(a[annotation.JoinIP])
	if err != nil {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %w", annotation.JoinIP, err)
	}
	cidrs, err := annotation.ParsePrefixes(a[annotation.JoinCIDR])
	if err != nil || len(cidrs) != len(ips) {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %q does not match %s", annotation.JoinCIDR, a[annotation.JoinCIDR], a[annotation.JoinIP])
	}
	gws, err := annotation.ParseAddrs(a[annotation.JoinGateway])
	if err != nil || len(gws) != len(ips) {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %q does not match %s", annotation.JoinGateway, a[annotation.JoinGateway], a[annotation.JoinIP])
	}
	mac, err := annotation.ParseMAC(a[annotation.JoinMAC])
	if err != nil {
		return JoinConfig{}, false, fmt.Errorf("node annotation %s: %w", annotation.JoinMAC, err)
	}
	jc := JoinConfig{Gateways: gws, MAC: mac, IfaceID: contract.NodePortName(n.Name), MTU: mtu}
	for i, ip := range ips {
		if cidrs[i].Addr().Is4() != ip.Is4() || gws[i].Is4() != ip.Is4() {
			return JoinConfig{}, false, fmt.Errorf("node join annotations mix address families: ip %s, cidr %s, gateway %s", ip, cidrs[i], gws[i])
		}
		jc.IPs = append(jc.IPs, netip.PrefixFrom(ip, cidrs[i].Bits()))
	}
	return jc, true, nil
}

// SetupWithManager syncs on changes to this node or any Subnet.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Cfg.NodeName}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("node-network").
		Watches(&corev1.Node{}, toKey, builder.WithPredicates(nodecond.IgnoreHeartbeats)).Watches(&kovnv1.Subnet{}, toKey)
	if r.Ovn0Events != nil {
		b = b.WatchesRawSource(source.Channel(r.Ovn0Events, toKey))
	}
	return b.Complete(r)
}
