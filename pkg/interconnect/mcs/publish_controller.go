package mcs

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/ovn"
)

// PublishReconciler publishes to the clusterset store the pods of every namespace an admin
// labelled kovn.io/clusterset-peers=publish (their names, labels and the addresses kovn gave
// them, from IP objects, never from the pods) with the namespace's labels, for the other
// clusters' policies. One request per namespace; the empty name re-syncs every namespace
// (after a (re)connection the store may hold anything).
type PublishReconciler struct {
	client.Client
	Set *Clusterset
}

// Reconcile implements reconcile.Reconciler.
func (r *PublishReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if _, member := r.Set.Store(); member && !r.Set.answers() {
		// Not while the store is away: its cache reads wait for the reconnection, and the
		// writer lock held meanwhile would hold up leaving or renaming. The reconnection
		// re-syncs every namespace.
		return ctrl.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ovn.ReconcileTimeout)
	defer cancel()
	store, release := r.Set.Writer()
	defer release()
	if store == nil {
		return ctrl.Result{}, nil // the membership reconciler re-syncs all once connected
	}
	if req.Name != "" {
		return ctrl.Result{}, r.publish(ctx, store, req.Name)
	}
	names, err := store.PublishedNamespaces(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var list corev1.NamespaceList
	if err := r.List(ctx, &list, client.MatchingLabels{annotation.PublishPeersLabel: annotation.PublishPeersValue}); err != nil {
		return ctrl.Result{}, err
	}
	for _, ns := range list.Items {
		names[ns.Name] = true
	}
	for name := range names {
		if err := r.publish(ctx, store, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// publish makes the store hold namespace name's rows as they are now: none unless it is
// labelled for publishing.
func (r *PublishReconciler) publish(ctx context.Context, store *Store, name string) error {
	var ns corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: name}, &ns)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err != nil || !ns.DeletionTimestamp.IsZero() || ns.Labels[annotation.PublishPeersLabel] != annotation.PublishPeersValue {
		_, err := store.SyncPolicyNamespace(ctx, name, nil, nil)
		return err
	}
	pods, err := r.podsOf(ctx, name)
	if err != nil {
		return err
	}
	_, err = store.SyncPolicyNamespace(ctx, name, &PolicyNamespace{Name: name, Labels: maps.Clone(ns.Labels)}, pods)
	return err
}

// podsOf are namespace's pods with addresses: pods on the pod network kovn addressed, not
// finished, with the addresses of their IP objects.
func (r *PublishReconciler) podsOf(ctx context.Context, namespace string) ([]PolicyPod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []PolicyPod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var ip kovnv1.IP
		if err := r.Get(ctx, types.NamespacedName{Name: cluster.IPObjectName(p.Namespace, p.Name)}, &ip); err != nil {
			if apierrors.IsNotFound(err) {
				continue // not addressed yet: its IP object's event brings it
			}
			return nil, err
		}
		addrs, err := ip.Spec.Addrs()
		if err != nil || ip.Spec.PodName != p.Name || ip.Spec.Namespace != p.Namespace {
			continue
		}
		pod := PolicyPod{Namespace: namespace, Name: p.Name, Labels: maps.Clone(p.Labels)}
		for _, a := range addrs {
			pod.Addresses = append(pod.Addresses, a.String())
		}
		out = append(out, pod)
	}
	return out, nil
}

// SetupWithManager watches namespaces, pods, IP objects and this cluster's rows in the store.
func (r *PublishReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A pod's or IP object's event matters only in a published namespace (unpublishing is the
	// namespace's own event): the others never reach the store.
	ifPublished := func(ctx context.Context, ns string) []reconcile.Request {
		var n corev1.Namespace
		if err := r.Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil || n.Labels[annotation.PublishPeersLabel] != annotation.PublishPeersValue {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ns}}}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("mcs-policy-peers").For(&corev1.Namespace{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return ifPublished(ctx, o.GetNamespace())
		})).
		Watches(&kovnv1.IP{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if ip, ok := o.(*kovnv1.IP); ok && ip.Spec.PodName != "" {
				return ifPublished(ctx, ip.Spec.Namespace)
			}
			return nil
		})).
		WatchesRawSource(r.Set.PublishSource()).
		Complete(r)
}
