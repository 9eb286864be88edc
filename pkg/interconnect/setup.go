package interconnect

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// SetupWithManager reconciles the singleton on its own changes, on Nodes (gateways, node
// addresses), on Subnets (what is advertised) and on IC-SB/IC-NB changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.icEvents = make(chan event.GenericEvent, 1)
	r.ic.inspect = r.icsbRows.inspect
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: Name}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("interconnect").
		Watches(&kovnv1.InterConnect{}, toKey).
		Watches(&corev1.Node{}, toKey, builder.WithPredicates(predicate.Funcs{UpdateFunc: nodeChangeMatters})).
		Watches(&kovnv1.Subnet{}, toKey).
		Watches(&kovnv1.ForeignAZ{}, toKey).
		WatchesRawSource(source.Channel(r.icEvents, toKey)).
		Complete(r)
}

// nodeChangeMatters filters Node updates down to what the desired state reads: labels (the
// gateway selector), annotations (the gateway mark) and addresses (never advertised). Status
// heartbeats, every few seconds per node, do not re-queue the whole interconnect.
func nodeChangeMatters(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	return !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		!slices.Equal(o.Status.Addresses, n.Status.Addresses)
}

// Wake queues a reconcile of the InterConnect: a repair noted elsewhere (the MCS exports)
// changes its Degraded condition.
func (r *Reconciler) Wake() {
	if r.icEvents == nil {
		return
	}
	select {
	case r.icEvents <- event.GenericEvent{Object: &kovnv1.InterConnect{}}:
	default:
	}
}
