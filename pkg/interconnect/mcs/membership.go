package mcs

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	aboutv1 "github.com/kovn/kovn/api/about/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/interconnect"
	"github.com/kovn/kovn/pkg/ovn"
)

// Finalizer keeps a deleted InterConnect until this cluster's rows are out of the store, so
// every other cluster drops its exports at once.
const Finalizer = "kovn.io/mcs"

// MembershipReconciler connects the clusterset store while the InterConnect exists: the store
// is served by the IC-SB servers it names, and the cluster's id there is the value of the
// ClusterProperty cluster.clusterset.k8s.io (KEP-2149), created with the AZ name when missing.
// Leaving (the InterConnect deleted) removes the cluster's rows; a new id moves them.
type MembershipReconciler struct {
	client.Client
	Set *Clusterset
}

// +kubebuilder:rbac:groups=kovn.io,resources=interconnects,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=about.k8s.io,resources=clusterproperties,verbs=get;list;watch;create

// Reconcile implements reconcile.Reconciler.
func (r *MembershipReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ovn.ReconcileTimeout)
	defer cancel()
	var ic kovnv1.InterConnect
	err := r.Get(ctx, types.NamespacedName{Name: interconnect.Name}, &ic)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	r.Set.writers.Lock() // no export is written while the membership changes
	defer r.Set.writers.Unlock()
	if err != nil || !ic.DeletionTimestamp.IsZero() {
		if err == nil && controllerutil.ContainsFinalizer(&ic, Finalizer) {
			if err := r.forget(ctx, &ic); err != nil {
				return ctrl.Result{}, err
			}
			controllerutil.RemoveFinalizer(&ic, Finalizer)
			if err := r.Update(ctx, &ic); err != nil {
				return ctrl.Result{}, err
			}
		}
		if _, err := r.Set.set(ctx, "", nil); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.requeueAll(ctx)
	}
	if controllerutil.AddFinalizer(&ic, Finalizer) {
		if err := r.Update(ctx, &ic); err != nil {
			return ctrl.Result{}, err
		}
	}
	// The AZ the cluster joined under, not the one it asks for: an azName another cluster holds
	// is refused (AZNameTaken), and registering under it would send the clusterset's traffic
	// for this cluster's exports to that cluster. The status change of a join or rename
	// brings the InterConnect back here.
	az := ic.Status.AZName
	if az == "" {
		return ctrl.Result{}, nil
	}
	var oldID string
	if s, _ := r.Set.Store(); s != nil {
		oldID = s.Cluster
	}
	id, err := r.clusterID(ctx, az)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Set.loadCredentials(ctx, &ic.Spec); err != nil {
		ctrl.Log.WithName("mcs").Error(err, "no usable clusterset certificate")
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	changed, err := r.Set.set(ctx, id, ic.Spec.ICSouthbound)
	if err != nil {
		ctrl.Log.WithName("mcs").Error(err, "clusterset store unreachable", "endpoints", ic.Spec.ICSouthbound)
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	store, _ := r.Set.Store()
	if oldID != "" && oldID != store.Cluster {
		if err := store.ForgetCluster(ctx, oldID); err != nil { // renamed: the rows move to the new id
			return ctrl.Result{}, err
		}
	}
	missing, err := store.RegisterCluster(ctx, az)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("registering in the clusterset store: %w", err)
	}
	// Checked again every 30 s: a store that came back empty (a new database) is refilled.
	if changed || missing {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.requeueAll(ctx)
	}
	return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
}

// clusterID is the value of the ClusterProperty cluster.clusterset.k8s.io, which is created
// with the AZ name when missing. It names the cluster in the store and in the source-cluster
// label of every imported slice, so it must be a DNS label.
func (r *MembershipReconciler) clusterID(ctx context.Context, az string) (string, error) {
	cp := &aboutv1.ClusterProperty{}
	err := r.Get(ctx, types.NamespacedName{Name: aboutv1.ClusterIDProperty}, cp)
	if apierrors.IsNotFound(err) {
		cp = &aboutv1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: aboutv1.ClusterIDProperty},
			Spec: aboutv1.ClusterPropertySpec{Value: az}}
		err = r.Create(ctx, cp)
	}
	if err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Label(cp.Spec.Value); len(errs) > 0 {
		return "", fmt.Errorf("ClusterProperty %s: %q is not a valid cluster id: %s", aboutv1.ClusterIDProperty, cp.Spec.Value, strings.Join(errs, "; "))
	}
	return cp.Spec.Value, nil
}

// forget removes this cluster's rows from the store it was connected to (or connects to the
// InterConnect's endpoints for it).
func (r *MembershipReconciler) forget(ctx context.Context, ic *kovnv1.InterConnect) error {
	store, _ := r.Set.Store()
	if store == nil {
		id, err := r.clusterID(ctx, ic.Spec.AZName)
		if err != nil {
			return err
		}
		if err := r.Set.loadCredentials(ctx, &ic.Spec); err != nil {
			return fmt.Errorf("leaving the clusterset store: %w", err)
		}
		if _, err := r.Set.set(ctx, id, ic.Spec.ICSouthbound); err != nil {
			return fmt.Errorf("leaving the clusterset store: %w", err)
		}
		store, _ = r.Set.Store()
	}
	return store.ForgetCluster(ctx, store.Cluster)
}

// requeueAll re-queues every local export and import and the published namespaces: after a (re)connection the store may
// hold anything.
func (r *MembershipReconciler) requeueAll(ctx context.Context) error {
	var exports mcsv1.ServiceExportList
	if err := r.List(ctx, &exports); err != nil {
		return err
	}
	for _, e := range exports.Items {
		r.Set.Enqueue(e.Namespace, e.Name)
	}
	var imports mcsv1.ServiceImportList
	if err := r.List(ctx, &imports); err != nil {
		return err
	}
	for _, i := range imports.Items {
		r.Set.Enqueue(i.Namespace, i.Name)
	}
	r.Set.publishAll()
	return nil
}
