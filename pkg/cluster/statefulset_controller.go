package cluster

import (
	"context"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/contract"
)

// StatefulSetReconciler frees the addresses kept for StatefulSet pods once the StatefulSet no
// longer wants them: it was deleted, or scaled below the pod's ordinal.
type StatefulSetReconciler struct {
	client.Client
	State *State
}

// Reconcile implements reconcile.Reconciler.
func (r *StatefulSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var sts appsv1.StatefulSet
	err := r.Get(ctx, req.NamespacedName, &sts)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	gone := apierrors.IsNotFound(err) || sts.DeletionTimestamp != nil
	var ips kovnv1.IPList
	if err := r.List(ctx, &ips, client.MatchingLabels{contract.LabelStatefulSet: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	for i := range ips.Items {
		ip := &ips.Items[i]
		if ip.Spec.Namespace != req.Namespace {
			continue
		}
		ord, ok := ordinalOf(ip.Spec.PodName)
		wanted := !gone && ok && (sts.Spec.Replicas == nil || int32(ord) < *sts.Spec.Replicas)
		if wanted {
			continue
		}
		var pod corev1.Pod
		if err := r.Get(ctx, types.NamespacedName{Namespace: ip.Spec.Namespace, Name: ip.Spec.PodName}, &pod); err == nil {
			continue // the pod still runs; the Pod reconciler releases it when it goes
		}
		r.State.IPAM.Release(ipOwner(ip))
		if err := r.Delete(ctx, ip); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func ordinalOf(podName string) (int, bool) {
	i := strings.LastIndexByte(podName, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(podName[i+1:])
	return n, err == nil
}

// SetupWithManager registers the reconciler.
func (r *StatefulSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&appsv1.StatefulSet{}).Named("statefulset").Complete(r)
}
