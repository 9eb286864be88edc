package mcs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ExportReconciler writes each ServiceExport's Service and endpoints into the clusterset
// store (this cluster's rows only) and reports on the export whether it is valid, exported,
// and in conflict with another cluster's export of the same Service.
type ExportReconciler struct {
	client.Client
	Set *Clusterset
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *ExportReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	store, release := r.Set.Writer()
	defer release()
	var se mcsv1.ServiceExport
	if err := r.Get(ctx, req.NamespacedName, &se); err != nil || !se.DeletionTimestamp.IsZero() {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, withdraw(ctx, store, req.Namespace, req.Name)
	}
	before := se.DeepCopy()
	defer func() {
		if perr := r.Status().Patch(ctx, &se, client.MergeFrom(before)); perr != nil && err == nil {
			err = perr
		}
	}()
	if store == nil {
		setExportCondition(&se, mcsv1.ServiceExportConditionReady, false, mcsv1.ServiceExportReasonPending,
			"the cluster is not connected to a clusterset store (no InterConnect, or its IC-SB is unreachable)")
		return ctrl.Result{}, nil // the membership reconciler re-queues every export once connected
	}
	var svc corev1.Service
	if err := r.Get(ctx, req.NamespacedName, &svc); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.invalid(&se, mcsv1.ServiceExportReasonNoService, "no Service "+req.Name+" in namespace "+req.Namespace)
		return ctrl.Result{}, withdraw(ctx, store, req.Namespace, req.Name)
	}
	exp, reason, msg := ExportOf(store.Cluster, &svc, &se)
	if reason != "" {
		r.invalid(&se, reason, msg)
		return ctrl.Result{}, withdraw(ctx, store, req.Namespace, req.Name)
	}
	setExportCondition(&se, mcsv1.ServiceExportConditionValid, true, mcsv1.ServiceExportReasonValid, "")
	var eps discoveryv1.EndpointSliceList
	if err := r.List(ctx, &eps, client.InNamespace(req.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if err := publish(ctx, store, exp, SlicesOf(&svc, eps.Items)); err != nil {
		setExportCondition(&se, mcsv1.ServiceExportConditionReady, false, mcsv1.ServiceExportReasonFailed, err.Error())
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	exports, err := store.Exports(ctx, req.Namespace, req.Name)
	if errors.Is(err, ErrIncomplete) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil // conflicts judged on a whole view only
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	setConflict(&se, Merge(exports))
	setExportCondition(&se, mcsv1.ServiceExportConditionReady, true, mcsv1.ServiceExportReasonExported,
		"exported to the clusterset as cluster "+store.Cluster)
	return ctrl.Result{}, nil
}

func (r *ExportReconciler) invalid(se *mcsv1.ServiceExport, reason mcsv1.ServiceExportConditionReason, msg string) {
	setExportCondition(se, mcsv1.ServiceExportConditionValid, false, reason, msg)
	setExportCondition(se, mcsv1.ServiceExportConditionReady, false, mcsv1.ServiceExportReasonFailed, "not exported: "+msg)
	meta.RemoveStatusCondition(&se.Status.Conditions, string(mcsv1.ServiceExportConditionConflict))
}

// publish writes the export and its endpoint slices, this cluster's rows of namespace/name.
func publish(ctx context.Context, store *Store, exp Export, slices []Slice) error {
	if _, err := store.SyncExports(ctx, []Export{exp}, scopeOf(exp.Namespace, exp.Name)); err != nil {
		return fmt.Errorf("writing the export to the clusterset store: %w", err)
	}
	if _, err := store.SyncSlices(ctx, exp.Namespace, exp.Name, slices); err != nil {
		return fmt.Errorf("writing the endpoints to the clusterset store: %w", err)
	}
	return nil
}

// withdraw removes this cluster's export of namespace/name and its slices from the store.
func withdraw(ctx context.Context, store *Store, namespace, name string) error {
	if store == nil {
		return nil
	}
	if _, err := store.SyncSlices(ctx, namespace, name, nil); err != nil {
		return err
	}
	_, err := store.SyncExports(ctx, nil, scopeOf(namespace, name))
	return err
}

func scopeOf(namespace, name string) func(string, string) bool {
	return func(ns, n string) bool { return ns == namespace && n == name }
}

// setConflict sets the Conflict condition from the merged view of every cluster's export.
func setConflict(se *mcsv1.ServiceExport, im Import) {
	if len(im.Conflicts) == 0 {
		setExportCondition(se, mcsv1.ServiceExportConditionConflict, false, mcsv1.ServiceExportReasonNoConflicts, "")
		return
	}
	reasons := make([]string, len(im.Conflicts))
	for i, c := range im.Conflicts {
		reasons[i] = string(c)
	}
	setExportCondition(se, mcsv1.ServiceExportConditionConflict, true, mcsv1.ServiceExportConditionReason(strings.Join(reasons, ",")), im.Message)
}

func setExportCondition(se *mcsv1.ServiceExport, t mcsv1.ServiceExportConditionType, ok bool,
	reason mcsv1.ServiceExportConditionReason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&se.Status.Conditions, metav1.Condition{Type: string(t), Status: status, Reason: string(reason),
		Message: msg, ObservedGeneration: se.Generation})
}
