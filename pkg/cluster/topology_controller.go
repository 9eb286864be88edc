package cluster

import (
	"context"
	"net/netip"
	"sort"
	"time"

	"github.com/go-logr/logr"
	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// topologyKey is the one request the topology reconciler ever handles: every relevant change
// maps to it, so the workqueue coalesces bursts (50 pods created at once -> a few syncs).
var topologyKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "topology"}}

// TopologyReconciler recomputes the whole desired NB topology from the API and applies the
// difference in one transaction. Level-triggered: a restart, a lost event or a row someone
// deleted by hand all converge on the next pass; an unchanged world costs no transaction.
type TopologyReconciler struct {
	client.Client
	State  *State
	NB     libovsdb.Client
	Resync time.Duration
}

// Reconcile implements reconcile.Reconciler.
func (r *TopologyReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	in, err := r.input(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	n, err := nbsync.Apply(ctx, r.NB, topology.For(in))
	if err != nil {
		return ctrl.Result{}, err
	}
	if n > 0 {
		log.FromContext(ctx).V(1).Info("northbound synced", "operations", n, "pods", len(in.Pods), "nodes", len(in.Nodes))
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

func (r *TopologyReconciler) input(ctx context.Context) (topology.Input, error) {
	in := topology.Input{Vpcs: []topology.VpcIn{{Name: r.State.Opts.DefaultVpc}}, JoinSubnet: r.State.Opts.JoinSubnet,
		Subnets: r.State.Subnets()}
	valid := map[string]bool{}
	for _, s := range in.Subnets {
		valid[s.Name] = true
	}
	var subnets kovnv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return in, err
	}
	for _, s := range subnets.Items {
		if !valid[s.Name] {
			in.InvalidSubnets = append(in.InvalidSubnets, s.LogicalSwitchName())
		}
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return in, err
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, nodeIn(&nodes.Items[i]))
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return in, err
	}
	for i := range pods.Items {
		if p, ok := podIn(&pods.Items[i], valid); ok {
			in.Pods = append(in.Pods, p)
		}
	}
	sort.Slice(in.Pods, func(i, j int) bool {
		return in.Pods[i].Namespace+"/"+in.Pods[i].Name < in.Pods[j].Namespace+"/"+in.Pods[j].Name
	})
	return in, nil
}

func nodeIn(n *corev1.Node) topology.NodeIn {
	out := topology.NodeIn{Name: n.Name, JoinMAC: n.Annotations[annotation.JoinMAC]}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			out.Ready = true
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out.NodeIPs = append(out.NodeIPs, ip)
			}
		}
	}
	out.JoinIPs, _ = annotation.ParseAddrs(n.Annotations[annotation.JoinIP])
	return out
}

// podIn returns the pod's port if the controller allocated it and it still runs.
func podIn(p *corev1.Pod, validSubnets map[string]bool) (topology.PodIn, bool) {
	if p.Spec.HostNetwork || podFinished(p) {
		return topology.PodIn{}, false
	}
	pn, ok, err := annotation.PodNetworkFrom(p.Annotations)
	if !ok || err != nil || !validSubnets[pn.Switch] {
		return topology.PodIn{}, false
	}
	return topology.PodIn{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Subnet: pn.Switch, IPs: pn.IPs, MAC: pn.MAC}, true
}

// SetupWithManager registers the reconciler; every watched kind maps to the single key.
func (r *TopologyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{topologyKey}
	})
	c, err := controller.New("topology", mgr, controller.Options{Reconciler: r, MaxConcurrentReconciles: 1,
		LogConstructor: func(*reconcile.Request) logr.Logger { return mgr.GetLogger().WithName("topology") }})
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &kovnv1.Subnet{}} {
		if err := c.Watch(source.Kind(mgr.GetCache(), obj, toKey)); err != nil {
			return err
		}
	}
	return nil
}
