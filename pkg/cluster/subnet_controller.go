package cluster

import (
	"context"
	"time"

	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/equality"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ipam"
)

// SubnetReconciler validates Subnets, registers valid ones with the IPAM and reports
// conditions and address usage. The OVN side is the topology reconciler's job.
type SubnetReconciler struct {
	client.Client
	State    *State
	Recorder record.EventRecorder
}

// +kubebuilder:rbac:groups=kovn.io,resources=subnets;subnets/status,verbs=get;list;watch;update;patch

// Reconcile implements reconcile.Reconciler.
func (r *SubnetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var sn kovnv1.Subnet
	if err := r.Get(ctx, req.NamespacedName, &sn); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		r.State.deleteSubnet(req.Name)
		if err := r.State.IPAM.DeleteSubnet(req.Name); err != nil && !errors.Is(err, ipam.ErrNoSubnet) {
			log.FromContext(ctx).Info("subnet deleted while addresses are still allocated; they stay reserved", "subnet", req.Name, "err", err)
		}
		return ctrl.Result{}, nil
	}
	if !sn.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &sn)
	}
	if controllerutil.AddFinalizer(&sn, SubnetFinalizer) {
		if err := r.Update(ctx, &sn); err != nil {
			return ctrl.Result{}, err
		}
	}
	var all kovnv1.SubnetList
	if err := r.List(ctx, &all); err != nil {
		return ctrl.Result{}, err
	}
	before := sn.DeepCopy()
	in, verr := r.resolve(&sn, all.Items)
	if verr != nil {
		setCondition(&sn, kovnv1.ConditionValidated, false, kovnv1.ReasonOf(verr), verr.Error())
		setCondition(&sn, kovnv1.ConditionReady, false, kovnv1.ReasonValidationFailed, "spec is invalid: "+verr.Error())
		if meta.IsStatusConditionTrue(before.Status.Conditions, kovnv1.ConditionValidated) || len(before.Status.Conditions) == 0 {
			r.Recorder.Event(&sn, "Warning", kovnv1.ReasonOf(verr), verr.Error())
		}
	} else if err := r.State.IPAM.AddOrUpdateSubnet(in.Name, in.CIDRs, in.Gateways, mustExcludes(&sn)); err != nil {
		setCondition(&sn, kovnv1.ConditionValidated, false, kovnv1.ReasonInvalidCIDR, err.Error())
		setCondition(&sn, kovnv1.ConditionReady, false, kovnv1.ReasonValidationFailed, err.Error())
	} else {
		r.State.setSubnet(in)
		setCondition(&sn, kovnv1.ConditionValidated, true, kovnv1.ReasonValid, "spec is valid")
		setCondition(&sn, kovnv1.ConditionReady, true, kovnv1.ReasonReconciled, "registered with IPAM; logical switch "+in.Switch)
		sn.Status.ObservedGeneration = sn.Generation
	}
	r.fillUsage(&sn)
	if equality.Semantic.DeepEqual(before.Status, sn.Status) {
		return ctrl.Result{}, nil
	}
	// Update, not a merge patch: the status counts are required fields, and a patch from an empty
	// status would leave the zero ones out.
	return ctrl.Result{}, r.Status().Update(ctx, &sn)
}

// SubnetFinalizer holds a Subnet's deletion while pods (or nodes, for the join subnet) still
// hold addresses in it: deleting it then would pull the network from under running pods.
const SubnetFinalizer = "kovn.io/subnet"

// ReasonInUse: Ready=False on a Subnet being deleted while addresses are still allocated.
const ReasonInUse = "InUse"

func (r *SubnetReconciler) finalize(ctx context.Context, sn *kovnv1.Subnet) (ctrl.Result, error) {
	if owners := r.State.IPAM.Owners(sn.Name); len(owners) > 0 {
		msg := fmt.Sprintf("deletion waits for %d address holder(s) to go, e.g. %s", len(owners), owners[0])
		if !meta.IsStatusConditionPresentAndEqual(sn.Status.Conditions, kovnv1.ConditionReady, metav1.ConditionFalse) ||
			meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionReady).Message != msg {
			setCondition(sn, kovnv1.ConditionReady, false, ReasonInUse, msg)
			if err := r.Status().Update(ctx, sn); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	r.State.deleteSubnet(sn.Name)
	if err := r.State.IPAM.DeleteSubnet(sn.Name); err != nil && !errors.Is(err, ipam.ErrNoSubnet) {
		return ctrl.Result{}, err
	}
	if controllerutil.RemoveFinalizer(sn, SubnetFinalizer) {
		return ctrl.Result{}, r.Update(ctx, sn)
	}
	return ctrl.Result{}, nil
}

// resolve validates sn on its own and against every other Subnet, and turns it into the
// topology's input. Of two overlapping subnets in one VPC the older keeps its CIDR.
func (r *SubnetReconciler) resolve(sn *kovnv1.Subnet, all []kovnv1.Subnet) (topology.SubnetIn, error) {
	if err := sn.Spec.Validate(); err != nil {
		return topology.SubnetIn{}, err
	}
	for i := range all {
		o := &all[i]
		if o.Name == sn.Name || !older(o, sn) {
			continue
		}
		if err := kovnv1.CheckOverlap(sn, o); err != nil {
			return topology.SubnetIn{}, err
		}
	}
	cidrs, _ := sn.Spec.CIDRs()
	gws, err := sn.Spec.EffectiveGateways()
	if err != nil {
		return topology.SubnetIn{}, err
	}
	in := topology.SubnetIn{Name: sn.Name, Vpc: sn.VpcName(), Switch: sn.LogicalSwitchName(), CIDRs: cidrs, Gateways: gws,
		ExcludeIPs: sn.Spec.ExcludeIPs, GatewayNodes: sn.Spec.GatewayNodes,
		Centralized: sn.Spec.EffectiveGatewayType() == kovnv1.GatewayCentralized}
	if in.Vpc != r.State.Opts.DefaultVpc {
		return in, &kovnv1.ValidationError{Field: "spec.vpc", Reason: kovnv1.ReasonVpcNotFound,
			Message: fmt.Sprintf("VPC %q: only the default VPC %q is supported so far", in.Vpc, r.State.Opts.DefaultVpc)}
	}
	return in, nil
}

func older(a, b *kovnv1.Subnet) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func mustExcludes(sn *kovnv1.Subnet) []kovnv1.IPRange {
	rs, _ := sn.Spec.ExcludeRanges() // validated before
	return rs
}

func (r *SubnetReconciler) fillUsage(sn *kovnv1.Subnet) {
	u, err := r.State.IPAM.Usage(sn.Name)
	if err != nil {
		return
	}
	sn.Status.V4UsedIPs, sn.Status.V4AvailableIPs = u.V4Used, u.V4Available
	sn.Status.V6UsedIPs, sn.Status.V6AvailableIPs = u.V6Used, u.V6Available
}

func setCondition(obj *kovnv1.Subnet, typ string, ok bool, reason, msg string) {
	setStatusCondition(&obj.Status.Conditions, obj.Generation, typ, ok, reason, msg)
}

// setStatusCondition sets one condition of any kovn object's status.
func setStatusCondition(conds *[]metav1.Condition, generation int64, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation})
}

// SetupWithManager registers the reconciler.
func (r *SubnetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&kovnv1.Subnet{}).Named("subnet").Complete(r)
}
