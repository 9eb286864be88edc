package cluster

import (
	"context"
	"sort"

	libovsdb "github.com/ovn-org/libovsdb/client"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// +kubebuilder:rbac:groups=kovn.io,resources=vpcs/status,verbs=get;update;patch

// VpcReconciler programs each VPC's logical router with its static and policy routes and
// reports the router and its subnets. Every VPC is its own router: subnets of different VPCs
// are isolated from each other and may reuse CIDRs. Only the VPC holding the join subnet (the
// default one) reaches nodes and the outside world through ovn0.
type VpcReconciler struct {
	client.Client
	State *State
	NB    libovsdb.Client
}

// Reconcile implements reconcile.Reconciler.
func (r *VpcReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var vpc kovnv1.Vpc
	if err := r.Get(ctx, req.NamespacedName, &vpc); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerVpc, req.Name))
	}
	before := vpc.DeepCopy()
	cond := func(typ string, ok bool, reason, msg string) {
		kovnv1.SetCondition(&vpc.Status.Conditions, vpc.Generation, typ, ok, reason, msg)
	}
	vpc.Status.Subnets = r.subnetsOf(vpc.Name)
	res, err := ctrl.Result{}, error(nil)
	if verr := vpc.Spec.Validate(); verr != nil {
		// The last valid routes stay programmed.
		cond(kovnv1.ConditionValidated, false, kovnv1.ReasonOf(verr), verr.Error())
		cond(kovnv1.ConditionReady, false, kovnv1.ReasonValidationFailed, "spec is invalid: "+verr.Error())
	} else {
		cond(kovnv1.ConditionValidated, true, kovnv1.ReasonValid, "spec is valid")
		res, err = applyShard(ctx, r.NB, topology.ForVpc(vpcIn(&vpc), r.State.Join()))
		if err != nil {
			cond(kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "programming OVN: "+err.Error())
		} else {
			vpc.Status.Router = vpc.Name
			vpc.Status.ObservedGeneration = vpc.Generation
			cond(kovnv1.ConditionReady, true, kovnv1.ReasonReconciled, "logical router "+vpc.Name+" programmed")
		}
	}
	if !equality.Semantic.DeepEqual(before.Status, vpc.Status) {
		if uerr := r.Status().Update(ctx, &vpc); uerr != nil && err == nil {
			err = uerr
		}
	}
	return res, err
}

// vpcIn turns a valid Vpc spec into the topology's input.
func vpcIn(v *kovnv1.Vpc) topology.VpcIn {
	in := topology.VpcIn{Name: v.Name}
	for _, r := range v.Spec.StaticRoutes {
		sr := topology.StaticRoute{Prefix: r.CIDR, Nexthop: r.NextHopIP}
		if r.Policy == kovnv1.RoutePolicySource {
			sr.Policy = nb.LogicalRouterStaticRoutePolicySrcIP
		}
		in.Routes = append(in.Routes, sr)
	}
	for _, p := range v.Spec.PolicyRoutes {
		pol := topology.Policy{Priority: int(p.Priority), Match: p.Match, Action: string(p.Action)}
		if p.NextHopIP != "" {
			pol.Nexthops = []string{p.NextHopIP}
		}
		in.Policies = append(in.Policies, pol)
	}
	return in
}

func (r *VpcReconciler) subnetsOf(vpc string) []string {
	var out []string
	for _, s := range r.State.Subnets() {
		if s.Vpc == vpc {
			out = append(out, s.Name)
		}
	}
	sort.Strings(out)
	return out
}

// SetupWithManager registers the reconciler; a subnet change refreshes its VPC's subnet list
// (and the join subnet's, the default routes).
func (r *VpcReconciler) SetupWithManager(mgr ctrl.Manager) error {
	subnetToVpc := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*kovnv1.Subnet).VpcName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).For(&kovnv1.Vpc{}).Watches(&kovnv1.Subnet{}, subnetToVpc).Named("vpc").Complete(r)
}
