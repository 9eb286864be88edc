package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// EgressIPReconciler gives each EgressIP its addresses (the external Subnet's IPAM, owner
// eipOwner) and translates the selected pods' outbound traffic to them on the external
// gateway port. The pods' addresses come from their IP objects, which only kovn-controller
// writes; the selection from labels, which pick pods but never name an address.
type EgressIPReconciler struct {
	client.Client
	State *State
	NB    libovsdb.Client
	// Health says which node hosts the external gateway port (status only); nil: unknown.
	Health *GatewayHealth
}

func eipOwner(name string) string { return "eip/" + name }

// +kubebuilder:rbac:groups=kovn.io,resources=egressips,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=egressips/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *EgressIPReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var eip kovnv1.EgressIP
	if err := r.Get(ctx, req.NamespacedName, &eip); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return releaseExternal(ctx, r.NB, r.State, topology.OwnerEgressIP, req.Name, eipOwner(req.Name))
	}
	before := eip.DeepCopy()
	defer func() {
		if equality.Semantic.DeepEqual(before.Status, eip.Status) {
			return
		}
		if uerr := r.Status().Update(ctx, &eip); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return r.sync(ctx, &eip, egressAddrStrings(before.Status.Addresses))
}

// sync allocates, selects, then programs. A refused claim or a bad selector leaves what the
// EgressIP held and had programmed untouched.
func (r *EgressIPReconciler) sync(ctx context.Context, eip *kovnv1.EgressIP, recorded []string) (ctrl.Result, error) {
	ready := func(ok bool, reason, msg string) {
		kovnv1.SetCondition(&eip.Status.Conditions, eip.Generation, kovnv1.ConditionReady, ok, reason, msg)
	}
	join := r.State.Join()
	if join == nil { // the default VPC's router is not built yet
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	sn, ok := r.State.Subnet(eip.Spec.Subnet)
	if !ok {
		ready(false, kovnv1.ReasonSubnetNotFound, fmt.Sprintf("Subnet %q does not exist or is not valid", eip.Spec.Subnet))
		return ctrl.Result{}, nil
	}
	if sn.Underlay == nil || sn.Underlay.External == nil {
		ready(false, kovnv1.ReasonNotExternal, fmt.Sprintf("Subnet %q has no spec.externalGateway: it is no external network", sn.Name))
		return ctrl.Result{}, nil
	}
	nsSel, podSel, err := egressSelectors(&eip.Spec)
	if err != nil {
		ready(false, kovnv1.ReasonInvalidSelector, err.Error()+"; what was programmed stays")
		return ctrl.Result{}, nil
	}
	alloc, reason, err := claimExternal(r.State, eipOwner(eip.Name), eip.Spec.Subnet, eip.Spec.Addresses, "egress")
	if err != nil {
		ready(false, reason, err.Error())
		return ctrl.Result{}, nil
	}
	gwPort := topology.RouterPortName(join.Vpc, sn.Switch)
	node := r.Health.Bound(gwPort)
	eip.Status.Addresses = nil
	for _, a := range alloc.IPs {
		eip.Status.Addresses = append(eip.Status.Addresses, kovnv1.EgressIPAddress{Address: a.String(), Node: node})
	}
	if !slices.Equal(egressAddrStrings(eip.Status.Addresses), recorded) {
		// The durable record first: a restarted controller restores the IPAM from it before
		// anything else may take the address.
		if err := r.Status().Update(ctx, eip); err != nil {
			return ctrl.Result{}, err
		}
	}
	pods, err := r.selectedPods(ctx, nsSel, podSel, join.Vpc)
	if err != nil {
		return ctrl.Result{}, err
	}
	in := topology.EgressIPIn{Name: eip.Name, Router: join.Vpc, GatewayPort: gwPort, Addresses: alloc.IPs, Nexthops: sn.Gateways}
	for _, p := range pods {
		in.PodIPs = append(in.PodIPs, p.IPs...)
	}
	res, err := applyShard(ctx, r.NB, topology.ForEgressIP(in))
	eip.Status.Pods = int32(len(pods))
	switch {
	case err != nil:
		ready(false, kovnv1.ReasonReconcileFailed, "programming OVN: "+err.Error())
	case res.RequeueAfter > 0:
		ready(false, kovnv1.ReasonReconciling, "waiting for the external gateway port of Subnet "+sn.Name)
	default:
		where := "no gateway node holds them yet"
		if node != "" {
			where = "held by " + node
		}
		ready(true, kovnv1.ReasonReconciled, fmt.Sprintf("%d pods leave as %s, %s", len(pods),
			strings.Join(egressAddrStrings(eip.Status.Addresses), ", "), where))
		eip.Status.ObservedGeneration = eip.Generation
	}
	return res, err
}

// egressSelectors parses the spec's selectors; an absent pod selector selects every pod.
func egressSelectors(spec *kovnv1.EgressIPSpec) (labels.Selector, labels.Selector, error) {
	nsSel, err := metav1.LabelSelectorAsSelector(&spec.NamespaceSelector)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	podSel := labels.Everything()
	if spec.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(spec.PodSelector); err != nil {
			return nil, nil, fmt.Errorf("spec.podSelector: %w", err)
		}
	}
	return nsSel, podSel, nil
}

// selectedPods are the running pods the selectors match that can use an egress address: in
// an overlay Subnet of the default VPC (vpc), off the host network, without a FloatingIP of
// their own (which wins), each with the addresses of its IP object.
func (r *EgressIPReconciler) selectedPods(ctx context.Context, nsSel, podSel labels.Selector, vpc string) ([]topology.PodIn, error) {
	var nss corev1.NamespaceList
	if err := r.List(ctx, &nss, client.MatchingLabelsSelector{Selector: nsSel}); err != nil {
		return nil, err
	}
	var fips kovnv1.FloatingIPList
	if err := r.List(ctx, &fips); err != nil {
		return nil, err
	}
	floating := map[string]bool{}
	for _, f := range fips.Items {
		floating[f.Spec.Pod.Namespace+"/"+f.Spec.Pod.Name] = true
	}
	var out []topology.PodIn
	for _, ns := range nss.Items {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(ns.Name), client.MatchingLabelsSelector{Selector: podSel}); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || podFinished(p) || p.Spec.HostNetwork || p.Spec.NodeName == "" || floating[p.Namespace+"/"+p.Name] {
				continue
			}
			var ip kovnv1.IP
			if err := r.Get(ctx, types.NamespacedName{Name: IPObjectName(p.Namespace, p.Name)}, &ip); err != nil {
				continue // no address yet: its IP object's creation brings it in
			}
			sn, ok := r.State.Subnet(ip.Spec.Subnet)
			if !ok || sn.Underlay != nil || sn.Vpc != vpc {
				continue
			}
			if in, err := podInFromIP(&ip, p, r.State); err == nil {
				out = append(out, in)
			}
		}
	}
	return out, nil
}

func egressAddrStrings(as []kovnv1.EgressIPAddress) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Address
	}
	return out
}

// SetupWithManager: an EgressIP follows its Subnet and the pods and namespaces it may select
// (created, deleted, relabelled, re-addressed), the FloatingIPs that take pods out of it, and
// OVN moving the external gateway port (its status names the node). A pod, its IP object or a
// namespace queues only the EgressIPs whose selectors match it (controller-runtime maps an
// update's old and new object both, so a pod relabelled out of one is seen by it); the rarer
// Subnet, FloatingIP and gateway events queue every EgressIP.
func (r *EgressIPReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return r.allRequests(ctx)
	})
	b := ctrl.NewControllerManagedBy(mgr).For(&kovnv1.EgressIP{}).Named("egressip").
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podRequests)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceRequests)).
		Watches(&kovnv1.IP{}, handler.EnqueueRequestsFromMapFunc(r.ipRequests)).
		Watches(&kovnv1.Subnet{}, all).
		Watches(&kovnv1.FloatingIP{}, all)
	if r.Health != nil {
		b = b.WatchesRawSource(source.Channel(r.Health.portEvents, handler.TypedFuncs[reconcile.Request, reconcile.Request]{
			GenericFunc: func(ctx context.Context, _ event.TypedGenericEvent[reconcile.Request], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				for _, req := range r.allRequests(ctx) {
					q.Add(req)
				}
			}}))
	}
	return b.Complete(r)
}

func (r *EgressIPReconciler) allRequests(ctx context.Context) []reconcile.Request {
	return r.matching(ctx, func(*kovnv1.EgressIP) bool { return true })
}

// matching queues the EgressIPs keep accepts; one whose selectors do not parse is queued
// too, so that its condition says why.
func (r *EgressIPReconciler) matching(ctx context.Context, keep func(*kovnv1.EgressIP) bool) []reconcile.Request {
	var eips kovnv1.EgressIPList
	if err := r.List(ctx, &eips); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range eips.Items {
		if keep(&eips.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: eips.Items[i].Name}})
		}
	}
	return out
}

// podRequests: the EgressIPs selecting a pod with these labels in its namespace.
func (r *EgressIPReconciler) podRequests(ctx context.Context, o client.Object) []reconcile.Request {
	return r.podSelectedBy(ctx, o.GetNamespace(), o.GetLabels())
}

// ipRequests: an IP object (re-)addresses its pod, so the EgressIPs selecting that pod.
func (r *EgressIPReconciler) ipRequests(ctx context.Context, o client.Object) []reconcile.Request {
	ip, ok := o.(*kovnv1.IP)
	if !ok || ip.Spec.PodName == "" {
		return nil
	}
	var pod corev1.Pod
	if err := r.Get(ctx, types.NamespacedName{Namespace: ip.Spec.Namespace, Name: ip.Spec.PodName}, &pod); err != nil {
		return nil // the pod's own events (and its deletion) queue what it left
	}
	return r.podSelectedBy(ctx, pod.Namespace, pod.Labels)
}

func (r *EgressIPReconciler) podSelectedBy(ctx context.Context, namespace string, podLabels map[string]string) []reconcile.Request {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // its deletion queues what selected it
		}
		return r.allRequests(ctx)
	}
	return r.matching(ctx, func(eip *kovnv1.EgressIP) bool {
		nsSel, podSel, err := egressSelectors(&eip.Spec)
		return err != nil || nsSel.Matches(labels.Set(ns.Labels)) && podSel.Matches(labels.Set(podLabels))
	})
}

// namespaceRequests: the EgressIPs whose namespace selector matches these labels.
func (r *EgressIPReconciler) namespaceRequests(ctx context.Context, o client.Object) []reconcile.Request {
	return r.matching(ctx, func(eip *kovnv1.EgressIP) bool {
		nsSel, _, err := egressSelectors(&eip.Spec)
		return err != nil || nsSel.Matches(labels.Set(o.GetLabels()))
	})
}
