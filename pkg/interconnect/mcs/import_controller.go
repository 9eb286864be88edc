package mcs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kovn/kovn/pkg/ovn"
)

// ImportReconciler makes a Service exported anywhere in the clusterset importable here: a
// ServiceImport, a derived Service holding the ClusterSetIPs, and an EndpointSlice per
// exported slice of every exporting cluster, which kovn's Service path turns into one OVN
// load balancer whose backends span the clusters. Nothing is imported into a namespace that
// does not exist.
type ImportReconciler struct {
	client.Client
	Set *Clusterset
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *ImportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ovn.ReconcileTimeout)
	defer cancel()
	store, member := r.Set.Store()
	if store == nil && member {
		return ctrl.Result{}, nil // disconnected: the last good imports stay; a reconnection re-queues
	}
	if store != nil && !store.Registered(ctx) {
		// Connecting, reconnecting, or not registered yet: the cache is not the store's view
		// yet, and the last good imports stay.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	var exports []Export
	var exported []Slice
	var local string
	if store != nil {
		local = store.Cluster
		var err error
		if exports, err = store.Exports(ctx, req.Namespace, req.Name); err == nil {
			exported, err = store.Slices(ctx, req.Namespace, req.Name)
		}
		if errors.Is(err, ErrIncomplete) {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil // the last good import stays
		}
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: req.Namespace}, &ns); err != nil || !ns.DeletionTimestamp.IsZero() {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		exports = nil // the namespace is missing here: no import until it exists
	}
	if len(exports) == 0 {
		return ctrl.Result{}, r.remove(ctx, req.NamespacedName)
	}
	im := Merge(exports)
	si, err := r.ensureImport(ctx, im)
	if err != nil {
		return ctrl.Result{}, err
	}
	derived, err := r.ensureDerived(ctx, im, si)
	if err != nil {
		return r.notReady(ctx, si, err.Error())
	}
	if err := r.syncSlices(ctx, im, si, ImportedSlices(im, exported, local)); err != nil {
		return ctrl.Result{}, err
	}
	return r.finish(ctx, si, ImportSpec(im, derived), im)
}

// ensureImport creates the ServiceImport (its spec is completed by finish).
func (r *ImportReconciler) ensureImport(ctx context.Context, im Import) (*mcsv1.ServiceImport, error) {
	si := &mcsv1.ServiceImport{}
	err := r.Get(ctx, types.NamespacedName{Namespace: im.Namespace, Name: im.Name}, si)
	if apierrors.IsNotFound(err) {
		si = &mcsv1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: im.Namespace, Name: im.Name,
			Annotations: map[string]string{AnnotationDerivedService: DerivedName(im.Name)}},
			Spec: ImportSpec(im, nil)}
		err = r.Create(ctx, si)
	}
	return si, err
}

// ensureDerived creates or updates the derived Service, owned by the ServiceImport. Its
// ClusterIPs are immutable: a change between Headless and ClusterSetIP recreates it.
func (r *ImportReconciler) ensureDerived(ctx context.Context, im Import, si *mcsv1.ServiceImport) (*corev1.Service, error) {
	want := DerivedService(im)
	if err := controllerutil.SetControllerReference(si, want, r.Scheme()); err != nil {
		return nil, err
	}
	var cur corev1.Service
	err := r.Get(ctx, client.ObjectKeyFromObject(want), &cur)
	switch {
	case apierrors.IsNotFound(err):
		return want, r.Create(ctx, want)
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(&cur, si):
		return nil, fmt.Errorf("Service %s/%s exists and is not kovn's derived Service of this import: not touched", cur.Namespace, cur.Name) //nolint:staticcheck // ST1005: "Service" is the kind's name
	case (cur.Spec.ClusterIP == corev1.ClusterIPNone) != (want.Spec.ClusterIP == corev1.ClusterIPNone) ||
		!slices.Equal(cur.Spec.IPFamilies, want.Spec.IPFamilies):
		if err := r.Delete(ctx, &cur); err != nil {
			return nil, err
		}
		return want, r.Create(ctx, want)
	}
	next := cur.DeepCopy()
	next.Labels = want.Labels
	next.Spec.Ports, next.Spec.SessionAffinity, next.Spec.SessionAffinityConfig = want.Spec.Ports, want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	next.Spec.InternalTrafficPolicy, next.Spec.TrafficDistribution = want.Spec.InternalTrafficPolicy, want.Spec.TrafficDistribution
	// Where the import says nothing, the apiserver's defaults stay (no rewrite every reconcile).
	if next.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && next.Spec.SessionAffinityConfig == nil {
		next.Spec.SessionAffinityConfig = cur.Spec.SessionAffinityConfig
	}
	if next.Spec.InternalTrafficPolicy == nil {
		next.Spec.InternalTrafficPolicy = cur.Spec.InternalTrafficPolicy
	}
	if apiequality.Semantic.DeepEqual(next, &cur) {
		return &cur, nil
	}
	return next, r.Update(ctx, next)
}

// syncSlices makes the derived Service's MCS slices exactly want. Writes that give a port to
// a slice go first, those that take one away after them, deletions last: when the import's
// locality moves a port from one cluster's slices to another's, the load balancer has a
// backend for it at every step.
func (r *ImportReconciler) syncSlices(ctx context.Context, im Import, si *mcsv1.ServiceImport, want []*discoveryv1.EndpointSlice) error {
	var have discoveryv1.EndpointSliceList
	if err := r.List(ctx, &have, client.InNamespace(im.Namespace),
		client.MatchingLabels{mcsv1.LabelServiceName: im.Name, discoveryv1.LabelManagedBy: ManagedBy}); err != nil {
		return err
	}
	cur := map[string]*discoveryv1.EndpointSlice{}
	for i := range have.Items {
		cur[have.Items[i].Name] = &have.Items[i]
	}
	var grow, shrink []*discoveryv1.EndpointSlice
	for _, w := range want {
		if err := controllerutil.SetControllerReference(si, w, r.Scheme()); err != nil {
			return err
		}
		c, ok := cur[w.Name]
		delete(cur, w.Name)
		switch {
		case !ok:
			grow = append(grow, w)
		case !maps.Equal(c.Labels, w.Labels) || !apiequality.Semantic.DeepEqual(c.Ports, w.Ports) ||
			!apiequality.Semantic.DeepEqual(c.Endpoints, w.Endpoints) || c.AddressType != w.AddressType:
			w.ResourceVersion = c.ResourceVersion
			if gainsPort(c, w) {
				grow = append(grow, w)
			} else {
				shrink = append(shrink, w)
			}
		}
	}
	for _, w := range append(grow, shrink...) {
		var err error
		if w.ResourceVersion == "" { // not there yet
			err = r.Create(ctx, w)
		} else {
			err = r.Update(ctx, w)
		}
		if err != nil {
			return err
		}
	}
	for _, stale := range cur {
		if err := r.Delete(ctx, stale); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// gainsPort says whether slice w has a port cur has not.
func gainsPort(cur, w *discoveryv1.EndpointSlice) bool {
	for _, p := range w.Ports {
		if !slices.ContainsFunc(cur.Ports, func(q discoveryv1.EndpointPort) bool { return apiequality.Semantic.DeepEqual(p, q) }) {
			return true
		}
	}
	return false
}

// finish writes the import's spec (with the ClusterSetIPs) and status.
func (r *ImportReconciler) finish(ctx context.Context, si *mcsv1.ServiceImport, spec mcsv1.ServiceImportSpec, im Import) (ctrl.Result, error) {
	// exportedLabels and exportedAnnotations of the winning export; the derived Service's
	// name stays annotated as the mcs-api reference controllers do.
	annotations := maps.Clone(im.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationDerivedService] = DerivedName(im.Name)
	if !apiequality.Semantic.DeepEqual(si.Spec, spec) || !maps.Equal(si.Labels, im.Labels) || !maps.Equal(si.Annotations, annotations) {
		si.Spec, si.Labels, si.Annotations = spec, im.Labels, annotations
		if err := r.Update(ctx, si); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := si.DeepCopy()
	si.Status.Clusters = nil
	for _, c := range im.Clusters {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1.ClusterStatus{Cluster: c})
	}
	ready := im.Type == string(mcsv1.Headless) || len(spec.IPs) > 0
	reason, msg := mcsv1.ServiceImportReasonReady, ""
	if !ready {
		reason, msg = mcsv1.ServiceImportReasonPending, "waiting for the derived Service's ClusterIPs"
	}
	setImportReady(si, ready, reason, msg)
	if apiequality.Semantic.DeepEqual(before.Status, si.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Status().Patch(ctx, si, client.MergeFrom(before))
}

func (r *ImportReconciler) notReady(ctx context.Context, si *mcsv1.ServiceImport, msg string) (ctrl.Result, error) {
	before := si.DeepCopy()
	setImportReady(si, false, mcsv1.ServiceImportReasonPending, msg)
	if err := r.Status().Patch(ctx, si, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
}

func setImportReady(si *mcsv1.ServiceImport, ok bool, reason mcsv1.ServiceImportConditionReason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&si.Status.Conditions, metav1.Condition{Type: string(mcsv1.ServiceImportConditionReady),
		Status: status, Reason: string(reason), Message: msg, ObservedGeneration: si.Generation})
}

// remove deletes the import and what was derived from it (owner references would too, but
// only once the garbage collector gets to them).
func (r *ImportReconciler) remove(ctx context.Context, key types.NamespacedName) error {
	if err := r.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(key.Namespace),
		client.MatchingLabels{mcsv1.LabelServiceName: key.Name, discoveryv1.LabelManagedBy: ManagedBy}); err != nil {
		return err
	}
	var derived corev1.Service
	err := r.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: DerivedName(key.Name)}, &derived)
	if ref := metav1.GetControllerOf(&derived); err == nil && ref != nil && ref.Kind == "ServiceImport" && ref.Name == key.Name {
		if err := r.Delete(ctx, &derived); client.IgnoreNotFound(err) != nil {
			return err
		}
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	si := &mcsv1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	return client.IgnoreNotFound(r.Delete(ctx, si))
}
