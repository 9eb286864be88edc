package peerprobe

import (
	"context"
	"net/netip"
	"strings"
	"sync"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/ovn/model/vswitch"
	"github.com/kovn/kovn/pkg/underlay"
)

// Reconciler keeps this node's probe tunnels as its annotation.ICPeerGateways says and its
// annotation.ICPeersDown as their sessions say. It runs on every node (a node that is no
// gateway has no tunnels and no report).
type Reconciler struct {
	client.Client
	OVS      libovsdb.Client
	NodeName string
	// Integration is br-int: the probe bridge shares its datapath type.
	Integration string

	mu     sync.Mutex
	seenUp map[string]bool // AZs with a session up since the tunnels were made
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: r.NodeName}, &node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	peers, err := annotation.ParsePeerGateways(node.Annotations[annotation.ICPeerGateways])
	if err != nil {
		return ctrl.Result{}, err // kovn-controller's own writing: nothing to guess from
	}
	want := wanted(peers)
	datapath := ""
	if len(want) > 0 {
		if datapath, err = underlay.DatapathType(ctx, r.OVS, r.Integration); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := syncTunnels(ctx, r.OVS, want, datapath); err != nil {
		return ctrl.Result{}, err
	}
	states, err := sessions(ctx, r.OVS)
	if err != nil {
		return ctrl.Result{}, err
	}
	down := annotation.FormatPeersDown(r.down(peers, states))
	if node.Annotations[annotation.ICPeersDown] == down {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if down == "" {
		delete(node.Annotations, annotation.ICPeersDown)
	} else {
		metav1.SetMetaDataAnnotation(&node.ObjectMeta, annotation.ICPeersDown, down)
	}
	return ctrl.Result{}, r.Patch(ctx, &node, patch)
}

// down are the AZs of peers whose sessions are all not up, after one was up. An AZ never up
// (its gateways run no probes: an older kovn, a foreign AZ) is not reported: reachability is
// then the clusterset store's to say.
func (r *Reconciler) down(peers map[string][]netip.Addr, states map[string][]string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seenUp == nil {
		r.seenUp = map[string]bool{}
	}
	var out []string
	for az := range r.seenUp {
		if _, ok := peers[az]; !ok {
			delete(r.seenUp, az) // no longer a peer: starts afresh if it comes back
		}
	}
	for az := range peers {
		up := false
		for _, st := range states[az] {
			up = up || st == "up"
		}
		switch {
		case up:
			r.seenUp[az] = true
		case r.seenUp[az] && len(states[az]) > 0:
			out = append(out, az)
		}
	}
	return out
}

// SetupWithManager reconciles on this node's annotations and on every change of a probe
// interface (its BFD state).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.NodeName}}
	events := make(chan event.TypedGenericEvent[reconcile.Request], 1)
	kick := func(table string, rows ...model.Model) {
		if table != vswitch.InterfaceTable {
			return
		}
		for _, m := range rows {
			if i, ok := m.(*vswitch.Interface); ok && strings.HasPrefix(i.Name, portPrefix) {
				select {
				case events <- event.TypedGenericEvent[reconcile.Request]{}:
				default: // one pending event reads every session
				}
				return
			}
		}
	}
	r.OVS.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { kick(table, m) },
		UpdateFunc: func(table string, old, m model.Model) { kick(table, old, m) },
		DeleteFunc: func(table string, m model.Model) { kick(table, m) },
	})
	annotations := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		return o[annotation.ICPeerGateways] != n[annotation.ICPeerGateways] || o[annotation.ICPeersDown] != n[annotation.ICPeersDown]
	}}
	return ctrl.NewControllerManagedBy(mgr).Named("ic-peer-probe").
		For(&corev1.Node{}, builder.WithPredicates(annotations, predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == r.NodeName
		}))).
		WatchesRawSource(source.Channel(events, handler.TypedFuncs[reconcile.Request, reconcile.Request]{
			GenericFunc: func(_ context.Context, _ event.TypedGenericEvent[reconcile.Request], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.Add(key)
			}})).
		Complete(r)
}
