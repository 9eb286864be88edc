package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ipam"
	"github.com/kovn/kovn/pkg/nodecond"
)

// SubnetReconciler validates Subnets, registers valid ones with the IPAM, programs their shard
// (switch, router port, policies) in OVN and reports conditions and address usage. An update
// that turns a Subnet invalid leaves its last valid form programmed.
type SubnetReconciler struct {
	client.Client
	State    *State
	Recorder record.EventRecorder
	NB       libovsdb.Client
	// Health says which gateway node OVN finds alive for a centralized subnet; nil: Node
	// readiness alone decides.
	Health *GatewayHealth

	lastUsageWrite map[string]time.Time // single worker: no lock needed
}

// usageInterval bounds how often address counts alone are written: a burst of pods must not
// turn into one status write per pod, and counts stay at most this stale.
const usageInterval = 500 * time.Millisecond

// +kubebuilder:rbac:groups=kovn.io,resources=subnets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=kovn.io,resources=subnets/status,verbs=get;update
// +kubebuilder:rbac:groups=kovn.io,resources=subnets/finalizers,verbs=update
// +kubebuilder:rbac:groups=kovn.io,resources=vlans,verbs=get;list;watch

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
		return r.forget(ctx, req.Name)
	}
	if !sn.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &sn)
	}
	if controllerutil.AddFinalizer(&sn, SubnetFinalizer) {
		if err := r.Update(ctx, &sn); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := sn.DeepCopy()
	res, err := r.sync(ctx, &sn)
	r.fillStatus(&sn)
	if equality.Semantic.DeepEqual(before.Status, sn.Status) {
		return res, err
	}
	if wait := r.usageBackoff(before, &sn); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	// Update, not a merge patch: the status counts are required fields, and a patch from an
	// empty status would leave the zero ones out.
	if uerr := r.Status().Update(ctx, &sn); uerr != nil && err == nil {
		err = uerr
	}
	r.lastUsageWrite[sn.Name] = time.Now()
	return res, err
}

// usageBackoff returns how long to hold back a status write that changes only address counts.
func (r *SubnetReconciler) usageBackoff(before, after *kovnv1.Subnet) time.Duration {
	if r.lastUsageWrite == nil {
		r.lastUsageWrite = map[string]time.Time{}
	}
	b, a := before.Status, after.Status
	b.V4UsedIPs, b.V4AvailableIPs, b.V6UsedIPs, b.V6AvailableIPs = a.V4UsedIPs, a.V4AvailableIPs, a.V6UsedIPs, a.V6AvailableIPs
	if !equality.Semantic.DeepEqual(b, a) {
		return 0 // conditions or other fields changed: write at once
	}
	return usageInterval - time.Since(r.lastUsageWrite[after.Name])
}

// sync validates sn, registers it with the IPAM and programs it; conditions say how far it got.
func (r *SubnetReconciler) sync(ctx context.Context, sn *kovnv1.Subnet) (ctrl.Result, error) {
	var all kovnv1.SubnetList
	if err := r.List(ctx, &all); err != nil {
		return ctrl.Result{}, err
	}
	// Warn once when a subnet turns invalid, not on every reconcile while it stays so.
	warn := len(sn.Status.Conditions) == 0 || meta.IsStatusConditionTrue(sn.Status.Conditions, kovnv1.ConditionValidated)
	in, verr := r.resolve(ctx, sn, all.Items)
	// Rebuilding the IPAM's subnet costs as much as the subnet is large; most Subnet events are
	// address holders coming and going (usage), which change nothing the IPAM was given.
	if prev, ok := r.State.Subnet(sn.Name); verr == nil && (!ok || !reflect.DeepEqual(prev, in)) {
		if err := r.State.IPAM.AddOrUpdateSubnet(in.Name, in.CIDRs, in.Gateways, mustExcludes(sn)); err != nil {
			verr = &kovnv1.ValidationError{Field: "spec", Reason: kovnv1.ReasonInvalidCIDR, Message: err.Error()}
		}
	}
	if verr != nil {
		setCondition(sn, kovnv1.ConditionValidated, false, kovnv1.ReasonOf(verr), verr.Error())
		msg := "spec is invalid: " + verr.Error()
		if _, kept := r.State.Subnet(sn.Name); kept {
			msg += "; the last valid spec stays programmed"
		}
		setCondition(sn, kovnv1.ConditionReady, false, kovnv1.ReasonValidationFailed, msg)
		if warn {
			r.Recorder.Event(sn, corev1.EventTypeWarning, kovnv1.ReasonOf(verr), verr.Error())
		}
		return ctrl.Result{}, nil
	}
	r.State.setSubnet(in)
	setCondition(sn, kovnv1.ConditionValidated, true, kovnv1.ReasonValid, "spec is valid")
	setSupported(sn)
	return r.program(ctx, sn, in)
}

// program applies the subnet's shard and sets Ready from the outcome.
func (r *SubnetReconciler) program(ctx context.Context, sn *kovnv1.Subnet, in topology.SubnetIn) (ctrl.Result, error) {
	res, err := applyShard(ctx, r.NB, topology.ForSubnet(in, r.State.Join(), r.gatewayNodes(ctx, in)))
	switch {
	case err != nil:
		setCondition(sn, kovnv1.ConditionReady, false, kovnv1.ReasonReconcileFailed, "programming OVN: "+err.Error())
	case res.RequeueAfter > 0:
		setCondition(sn, kovnv1.ConditionReady, false, kovnv1.ReasonReconciling, "waiting for the router of VPC "+in.Vpc)
	default:
		setCondition(sn, kovnv1.ConditionReady, true, kovnv1.ReasonReconciled, "logical switch "+in.Switch+" programmed")
		sn.Status.ObservedGeneration = sn.Generation
	}
	return res, err
}

// gatewayNodes returns the subnet's gateway nodes that exist, for ForSubnet.
func (r *SubnetReconciler) gatewayNodes(ctx context.Context, in topology.SubnetIn) map[string]topology.NodeIn {
	out := map[string]topology.NodeIn{}
	if !in.Centralized {
		return out
	}
	bound := r.Health.Bound(topology.HealthPortName(in.Name))
	for _, name := range in.GatewayNodes {
		var n corev1.Node
		if err := r.Get(ctx, types.NamespacedName{Name: name}, &n); err == nil {
			ni := nodeIn(&n)
			if alloc, ok := r.State.IPAM.Lookup(nodeOwner(name)); ok {
				ni.JoinIPs = alloc.IPs // the IPAM's record: a node's own annotations are not trusted
			}
			ni.HoldsHealthPort = name == bound
			out[name] = ni
		}
	}
	return out
}

// setSupported reports the spec fields kovn accepts but does not implement yet.
func setSupported(sn *kovnv1.Subnet) {
	var unimpl []string
	if len(unimpl) == 0 {
		setCondition(sn, kovnv1.ConditionSupported, true, kovnv1.ReasonImplemented, "every field of the spec is implemented")
		return
	}
	setCondition(sn, kovnv1.ConditionSupported, false, kovnv1.ReasonNotImplemented,
		"not implemented yet, so not in effect: "+strings.Join(unimpl, "; ")+"; the rest of the subnet is programmed")
}

// forget drops a deleted subnet from the IPAM and removes its rows from OVN.
func (r *SubnetReconciler) forget(ctx context.Context, name string) (ctrl.Result, error) {
	r.State.deleteSubnet(name)
	subnetAddresses.DeletePartialMatch(map[string]string{"subnet": name})
	if err := r.State.IPAM.DeleteSubnet(name); err != nil && !errors.Is(err, ipam.ErrNoSubnet) {
		log.FromContext(ctx).Info("subnet deleted while addresses are still allocated; they stay reserved", "subnet", name, "err", err)
	}
	return applyShard(ctx, r.NB, emptyShard(topology.OwnerSubnet, name))
}

// SubnetFinalizer holds a Subnet's deletion while pods (or nodes, for the join subnet) still
// hold addresses in it: deleting it then would pull the network from under running pods.
const SubnetFinalizer = "kovn.io/subnet"

// ReasonInUse: Ready=False on a Subnet being deleted while addresses are still allocated.
const ReasonInUse = "InUse"

// finalize keeps a deleted subnet fully programmed while addresses are held, then removes it
// from OVN and the IPAM and lets the deletion finish.
func (r *SubnetReconciler) finalize(ctx context.Context, sn *kovnv1.Subnet) (ctrl.Result, error) {
	if owners := r.State.IPAM.Owners(sn.Name); len(owners) > 0 {
		msg := fmt.Sprintf("deletion waits for %d address holder(s) to go, e.g. %s; the subnet stays programmed until then", len(owners), owners[0])
		if c := meta.FindStatusCondition(sn.Status.Conditions, kovnv1.ConditionReady); c == nil || c.Reason != ReasonInUse || c.Message != msg {
			setCondition(sn, kovnv1.ConditionReady, false, ReasonInUse, msg)
			r.fillStatus(sn)
			if err := r.Status().Update(ctx, sn); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if res, err := r.forget(ctx, sn.Name); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if controllerutil.RemoveFinalizer(sn, SubnetFinalizer) {
		return ctrl.Result{}, r.Update(ctx, sn)
	}
	return ctrl.Result{}, nil
}

// fillStatus writes the effective protocol, gateway, switch and the IPAM's address counts.
func (r *SubnetReconciler) fillStatus(sn *kovnv1.Subnet) {
	if p, err := sn.Spec.DerivedProtocol(); err == nil {
		sn.Status.Protocol = p
	}
	if gws, err := sn.Spec.EffectiveGateways(); err == nil {
		sn.Status.Gateway = annotation.JoinAddrs(gws)
	}
	sn.Status.LogicalSwitch = sn.LogicalSwitchName()
	u, err := r.State.IPAM.Usage(sn.Name)
	if err != nil {
		return
	}
	sn.Status.V4UsedIPs, sn.Status.V4AvailableIPs = u.V4Used, u.V4Available
	sn.Status.V6UsedIPs, sn.Status.V6AvailableIPs = u.V6Used, u.V6Available
	p := sn.Status.Protocol
	setSubnetAddresses(sn.Name, float64(u.V4Used), float64(u.V4Available), float64(u.V6Used), float64(u.V6Available),
		p == kovnv1.ProtocolIPv4 || p == kovnv1.ProtocolDual, p == kovnv1.ProtocolIPv6 || p == kovnv1.ProtocolDual)
}

func setCondition(obj *kovnv1.Subnet, typ string, ok bool, reason, msg string) {
	kovnv1.SetCondition(&obj.Status.Conditions, obj.Generation, typ, ok, reason, msg)
}

// SetupWithManager registers the reconciler. Address holders coming and going (IP objects)
// refresh the usage counts; gateway nodes changing move a centralized subnet's egress; a Vpc
// appearing lets its subnets validate.
func (r *SubnetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ipToSubnet := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if s := o.(*kovnv1.IP).Spec.Subnet; s != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: s}}}
		}
		return nil
	})
	nodeToSubnets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, s := range r.State.Subnets() {
			if s.Centralized && slices.Contains(s.GatewayNodes, o.GetName()) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
			}
		}
		// An external network whose gateway nodes come from labels: any node may join or leave.
		var subnets kovnv1.SubnetList
		if err := r.List(ctx, &subnets); err == nil {
			for _, sn := range subnets.Items {
				if eg := sn.Spec.ExternalGateway; eg != nil && len(eg.Nodes) == 0 && eg.NodeSelector != nil {
					reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: sn.Name}})
				}
			}
		}
		return reqs
	})
	vpcToSubnets := r.subnetsReferring(func(s *kovnv1.Subnet) string { return s.VpcName() })
	// The join subnet decides every default-VPC subnet's policies: when it changes, all follow.
	joinToAll := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetName() != r.State.Opts.JoinSubnet {
			return nil
		}
		var reqs []reconcile.Request
		for _, s := range r.State.Subnets() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
		}
		return reqs
	})
	vlanToSubnets := r.subnetsReferring(func(s *kovnv1.Subnet) string { return s.Spec.Vlan })
	b := ctrl.NewControllerManagedBy(mgr).For(&kovnv1.Subnet{}).Watches(&kovnv1.Subnet{}, joinToAll).
		Watches(&kovnv1.IP{}, ipToSubnet).Watches(&corev1.Node{}, nodeToSubnets, builder.WithPredicates(nodecond.IgnoreHeartbeats)).Watches(&kovnv1.Vpc{}, vpcToSubnets).
		Watches(&kovnv1.Vlan{}, vlanToSubnets)
	if r.Health != nil {
		// A centralized subnet's health port bound to another chassis moves its egress.
		b = b.WatchesRawSource(source.Channel(r.Health.events, handler.TypedFuncs[reconcile.Request, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[reconcile.Request], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.Add(e.Object)
			}}))
	}
	return b.Named("subnet").Complete(r)
}

// subnetsReferring maps an object to the Subnets whose ref (a Vpc or Vlan name) names it.
func (r *SubnetReconciler) subnetsReferring(ref func(*kovnv1.Subnet) string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var subnets kovnv1.SubnetList
		if err := r.List(ctx, &subnets); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range subnets.Items {
			if ref(&subnets.Items[i]) == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: subnets.Items[i].Name}})
			}
		}
		return reqs
	})
}
