package cluster

import (
	"context"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// VpcReconciler reports each VPC's router and subnets. Only the default VPC is realised so far;
// any other says so in its conditions rather than looking as if it worked.
type VpcReconciler struct {
	client.Client
	State *State
}

// +kubebuilder:rbac:groups=kovn.io,resources=vpcs;vpcs/status,verbs=get;list;watch;update;patch

// Reconcile implements reconcile.Reconciler.
func (r *VpcReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var vpc kovnv1.Vpc
	if err := r.Get(ctx, req.NamespacedName, &vpc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := vpc.DeepCopy()
	vpc.Status.Subnets = nil
	for _, s := range r.State.Subnets() {
		if s.Vpc == vpc.Name {
			vpc.Status.Subnets = append(vpc.Status.Subnets, s.Name)
		}
	}
	sort.Strings(vpc.Status.Subnets)
	cond := func(typ string, ok bool, reason, msg string) {
		setStatusCondition(&vpc.Status.Conditions, vpc.Generation, typ, ok, reason, msg)
	}
	if vpc.Name == r.State.Opts.DefaultVpc {
		vpc.Status.Router = vpc.Name
		vpc.Status.ObservedGeneration = vpc.Generation
		cond(kovnv1.ConditionReady, true, kovnv1.ReasonReconciled, "logical router "+vpc.Name)
	} else {
		vpc.Status.Router = ""
		cond(kovnv1.ConditionReady, false, ReasonNotSupported, "only the default VPC "+r.State.Opts.DefaultVpc+" is realised so far; custom VPCs are not implemented yet")
	}
	if equality.Semantic.DeepEqual(before.Status, vpc.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Status().Update(ctx, &vpc)
}

// ReasonNotSupported: the object asks for something kovn does not implement yet.
const ReasonNotSupported = "NotSupported"

// SetupWithManager registers the reconciler; subnet changes refresh every VPC's subnet list.
func (r *VpcReconciler) SetupWithManager(mgr ctrl.Manager) error {
	allVpcs := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var vpcs kovnv1.VpcList
		if err := r.List(ctx, &vpcs); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(vpcs.Items))
		for _, v := range vpcs.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&v)})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).For(&kovnv1.Vpc{}).Watches(&kovnv1.Subnet{}, allVpcs).Named("vpc").Complete(r)
}
