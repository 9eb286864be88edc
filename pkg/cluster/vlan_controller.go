package cluster

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// VlanReconciler reports on each Vlan whether its ProviderNetwork exists and which subnets use
// it. The OVN side of a Vlan is its subnets' localnet ports (SubnetReconciler); the node side is
// the provider bridge (kovn-daemon's underlay reconciler).
type VlanReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=kovn.io,resources=vlans,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=vlans/status,verbs=get;update
// +kubebuilder:rbac:groups=kovn.io,resources=providernetworks,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *VlanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var v kovnv1.Vlan
	if err := r.Get(ctx, req.NamespacedName, &v); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var subnets kovnv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return ctrl.Result{}, err
	}
	before := v.Status.DeepCopy()
	v.Status.Subnets = nil
	for _, s := range subnets.Items {
		if s.Spec.Vlan == v.Name {
			v.Status.Subnets = append(v.Status.Subnets, s.Name)
		}
	}
	slices.Sort(v.Status.Subnets)
	var pn kovnv1.ProviderNetwork
	switch err := r.Get(ctx, types.NamespacedName{Name: v.Spec.Provider}, &pn); {
	case err == nil:
		kovnv1.SetCondition(&v.Status.Conditions, v.Generation, kovnv1.ConditionReady, true, kovnv1.ReasonReconciled,
			"provider network "+v.Spec.Provider+" exists; its readyNodes carry this VLAN")
	case client.IgnoreNotFound(err) == nil:
		kovnv1.SetCondition(&v.Status.Conditions, v.Generation, kovnv1.ConditionReady, false, kovnv1.ReasonProviderNotFound,
			"provider network "+v.Spec.Provider+" does not exist: subnets on this VLAN reach no physical network")
	default:
		return ctrl.Result{}, err
	}
	if equality.Semantic.DeepEqual(before, &v.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Status().Update(ctx, &v)
}

// SetupWithManager: a ProviderNetwork coming or going, or a subnet joining, updates the Vlans
// concerned.
func (r *VlanReconciler) SetupWithManager(mgr ctrl.Manager) error {
	providerToVlans := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var vlans kovnv1.VlanList
		if err := r.List(ctx, &vlans); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, v := range vlans.Items {
			if v.Spec.Provider == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: v.Name}})
			}
		}
		return reqs
	})
	// Called with the old and the new object on an update: a subnet leaving a Vlan updates it too.
	subnetToVlan := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if s, ok := o.(*kovnv1.Subnet); ok && s.Spec.Vlan != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: s.Spec.Vlan}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).For(&kovnv1.Vlan{}).
		Watches(&kovnv1.ProviderNetwork{}, providerToVlans).Watches(&kovnv1.Subnet{}, subnetToVlan).
		Named("vlan").Complete(r)
}
