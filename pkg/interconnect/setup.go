package interconnect

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// SetupWithManager reconciles the singleton on its own changes, on Nodes (gateways, node
// addresses), on Subnets (what is advertised) and on IC-SB changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.icEvents = make(chan event.GenericEvent, 1)
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: Name}}
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("interconnect").
		Watches(&kovnv1.InterConnect{}, toKey).
		Watches(&corev1.Node{}, toKey).
		Watches(&kovnv1.Subnet{}, toKey).
		WatchesRawSource(source.Channel(r.icEvents, toKey)).
		Complete(r)
}
