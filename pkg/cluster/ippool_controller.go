package cluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// IPPoolReconciler registers IPPools with the IPAM and reports their validity and usage.
type IPPoolReconciler struct {
	client.Client
	State *State
	known map[string]string // pool -> subnet, to unregister deleted pools
}

// Reconcile implements reconcile.Reconciler.
func (r *IPPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if r.known == nil {
		r.known = map[string]string{}
	}
	var p kovnv1.IPPool
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if client.IgnoreNotFound(err) == nil && r.known[req.Name] != "" {
			_ = r.State.IPAM.DeletePool(r.known[req.Name], req.Name)
			delete(r.known, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := p.DeepCopy()
	set := func(ok bool, reason, msg string) {
		for _, typ := range []string{kovnv1.ConditionValidated, kovnv1.ConditionReady} {
			kovnv1.SetCondition(&p.Status.Conditions, p.Generation, typ, ok, reason, msg)
		}
	}
	rs, err := p.Spec.Ranges()
	if err == nil {
		err = r.State.IPAM.AddOrUpdatePool(p.Spec.Subnet, p.Name, ipamRanges(rs))
	}
	if err != nil {
		set(false, kovnv1.ReasonOf(err), err.Error())
	} else {
		r.known[p.Name] = p.Spec.Subnet
		set(true, kovnv1.ReasonValid, "registered with IPAM")
		if u, err := r.State.IPAM.PoolUsage(p.Spec.Subnet, p.Name); err == nil {
			p.Status.V4UsedIPs, p.Status.V4AvailableIPs = u.V4Used, u.V4Available
			p.Status.V6UsedIPs, p.Status.V6AvailableIPs = u.V6Used, u.V6Available
		}
	}
	if equality.Semantic.DeepEqual(before.Status, p.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Status().Update(ctx, &p)
}

// SetupWithManager registers the reconciler.
func (r *IPPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&kovnv1.IPPool{}).Named("ippool").Complete(r)
}
