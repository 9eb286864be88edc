package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ipam"
)

// FloatingIPReconciler binds each FloatingIP's addresses (the external Subnet's IPAM, owner
// fipOwner) to its pod's addresses: the pod's IP object, which only kovn-controller writes,
// says what they are; nothing a pod's owner writes does.
type FloatingIPReconciler struct {
	client.Client
	State *State
	NB    libovsdb.Client
}

func fipOwner(name string) string { return "fip/" + name }

// +kubebuilder:rbac:groups=kovn.io,resources=floatingips,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=floatingips/status,verbs=get;update;patch

// Reconcile implements reconcile.Reconciler.
func (r *FloatingIPReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	if err := r.State.WaitRestored(ctx); err != nil {
		return ctrl.Result{}, err
	}
	var fip kovnv1.FloatingIP
	if err := r.Get(ctx, req.NamespacedName, &fip); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		return releaseExternal(ctx, r.NB, r.State, topology.OwnerFloatingIP, req.Name, fipOwner(req.Name))
	}
	before := fip.DeepCopy()
	defer func() {
		if equality.Semantic.DeepEqual(before.Status, fip.Status) {
			return
		}
		if uerr := r.Status().Update(ctx, &fip); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return r.sync(ctx, &fip, before.Status.Addresses)
}

// releaseExternal removes what a deleted FloatingIP or EgressIP programmed, then gives its
// addresses back: only once nothing translates to them any more.
func releaseExternal(ctx context.Context, nb libovsdb.Client, st *State, ownerType, name, owner string) (ctrl.Result, error) {
	if res, err := applyShard(ctx, nb, emptyShard(ownerType, name)); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	st.IPAM.Release(owner)
	return ctrl.Result{}, nil
}

// sync allocates, then programs. A refused claim (the Subnet is not external, an address is
// taken or outside it) leaves what the FloatingIP held and had programmed untouched.
func (r *FloatingIPReconciler) sync(ctx context.Context, fip *kovnv1.FloatingIP, recorded []string) (ctrl.Result, error) {
	ready := func(ok bool, reason, msg string) {
		kovnv1.SetCondition(&fip.Status.Conditions, fip.Generation, kovnv1.ConditionReady, ok, reason, msg)
	}
	sn, ok := r.State.Subnet(fip.Spec.Subnet)
	if !ok {
		ready(false, kovnv1.ReasonSubnetNotFound, fmt.Sprintf("Subnet %q does not exist or is not valid", fip.Spec.Subnet))
		return ctrl.Result{}, nil
	}
	if sn.Underlay == nil || sn.Underlay.External == nil {
		ready(false, kovnv1.ReasonNotExternal, fmt.Sprintf("Subnet %q has no spec.externalGateway: it is no external network", sn.Name))
		return ctrl.Result{}, nil
	}
	alloc, reason, err := r.allocate(fip)
	if err != nil {
		ready(false, reason, err.Error())
		return ctrl.Result{}, nil
	}
	fip.Status.Addresses = addrStrings(alloc.IPs)
	if !slices.Equal(fip.Status.Addresses, recorded) {
		// The durable record first: a restarted controller restores the IPAM from it before
		// anything else may take the address.
		if err := r.Status().Update(ctx, fip); err != nil {
			return ctrl.Result{}, err
		}
	}
	join := r.State.Join()
	if join == nil {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	pairs, node, why := r.pairs(ctx, fip, alloc.IPs)
	in := topology.FloatingIPIn{Name: fip.Name, Router: join.Vpc, GatewayPort: topology.RouterPortName(join.Vpc, sn.Switch),
		Nexthops: sn.Gateways, Pairs: pairs}
	distributed, err := r.onExternalNetwork(ctx, sn.Underlay.Provider, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	if distributed && len(pairs) > 0 {
		in.PodPort = contract.PodPortName(fip.Spec.Pod.Namespace, fip.Spec.Pod.Name)
	}
	res, err := applyShard(ctx, r.NB, topology.ForFloatingIP(in))
	fip.Status.Node, fip.Status.Distributed = node, in.PodPort != ""
	fip.Status.PodIPs = nil
	for _, p := range pairs {
		fip.Status.PodIPs = append(fip.Status.PodIPs, p.Logical.String())
	}
	switch {
	case err != nil:
		ready(false, kovnv1.ReasonReconcileFailed, "programming OVN: "+err.Error())
	case res.RequeueAfter > 0:
		ready(false, kovnv1.ReasonReconciling, "waiting for the external gateway port of Subnet "+sn.Name)
	case why != "":
		ready(false, kovnv1.ReasonPodNotRunning, why+"; the addresses stay held and are bound when it runs")
	default:
		where := "translated on the external gateway's node"
		if fip.Status.Distributed {
			where = "translated on " + node + ", which is on the external network"
		}
		ready(true, kovnv1.ReasonReconciled, fmt.Sprintf("%s -> pod %s/%s (%s) on %s, %s", strings.Join(fip.Status.Addresses, ", "),
			fip.Spec.Pod.Namespace, fip.Spec.Pod.Name, strings.Join(fip.Status.PodIPs, ", "), node, where))
		fip.Status.ObservedGeneration = fip.Generation
	}
	return res, err
}

// +kubebuilder:rbac:groups=kovn.io,resources=providernetworks,verbs=get;list;watch

// onExternalNetwork says whether node has the provider network set up (kovn-daemon lists it
// in the ProviderNetwork's readyNodes), so that a pod there can be translated on its own node.
func (r *FloatingIPReconciler) onExternalNetwork(ctx context.Context, provider, node string) (bool, error) {
	if node == "" {
		return false, nil
	}
	var pn kovnv1.ProviderNetwork
	if err := r.Get(ctx, types.NamespacedName{Name: provider}, &pn); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return slices.Contains(pn.Status.ReadyNodes, node), nil
}

// allocate gives the FloatingIP its addresses: those it holds if they still fit its spec,
// else the ones asked for (or free ones). A claim that fails leaves what it held.
func (r *FloatingIPReconciler) allocate(fip *kovnv1.FloatingIP) (ipam.Allocation, string, error) {
	return claimExternal(r.State, fipOwner(fip.Name), fip.Spec.Subnet, fip.Spec.Addresses, "floating")
}

// claimExternal gives owner addresses of an external subnet, at most one per family: those it
// holds if they still fit the addresses wanted, else those (and free ones for the other
// families). A claim that fails leaves what owner held; the reason says why for a condition.
func claimExternal(st *State, owner, subnet string, addresses []string, what string) (ipam.Allocation, string, error) {
	var want []netip.Addr
	for _, a := range addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return ipam.Allocation{}, kovnv1.ReasonInvalidIPs, fmt.Errorf("spec.addresses: %q is not an IP address", a)
		}
		want = append(want, ip)
	}
	req := ipam.Request{Owner: owner, Subnet: subnet, IPs: want}
	held, holds := st.IPAM.Lookup(owner)
	if holds && (held.Subnet != req.Subnet || !containsAll(held.IPs, want)) {
		st.IPAM.Release(owner) // the spec changed: claim anew, the old addresses back on failure
	}
	alloc, err := st.IPAM.Allocate(req)
	if err == nil {
		return alloc, "", nil
	}
	if holds {
		_ = st.IPAM.Restore(owner, held)
	}
	reason := kovnv1.ReasonReconcileFailed
	switch {
	case errors.Is(err, ipam.ErrConflict), errors.Is(err, ipam.ErrInUse):
		reason = kovnv1.ReasonAddressInUse
	case errors.Is(err, ipam.ErrOutOfRange), errors.Is(err, ipam.ErrInvalid):
		reason = kovnv1.ReasonOutsideSubnet
	}
	return ipam.Allocation{}, reason, fmt.Errorf("%s addresses %v in Subnet %s: %w; nothing programmed for them", what, addresses, subnet, err)
}

func containsAll(have, want []netip.Addr) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// pairs matches each floating address with the pod's address of its family, from the pod's
// IP object (kovn's own record, checked against the pod); why says what is missing.
func (r *FloatingIPReconciler) pairs(ctx context.Context, fip *kovnv1.FloatingIP, floating []netip.Addr) ([]topology.FloatingPair, string, string) {
	ns, name := fip.Spec.Pod.Namespace, fip.Spec.Pod.Name
	var pod corev1.Pod
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
		return nil, "", fmt.Sprintf("pod %s/%s: %v", ns, name, client.IgnoreNotFound(err))
	}
	if pod.DeletionTimestamp != nil || podFinished(&pod) || pod.Spec.HostNetwork {
		return nil, "", fmt.Sprintf("pod %s/%s is going, finished or on the host network", ns, name)
	}
	var ip kovnv1.IP
	if err := r.Get(ctx, types.NamespacedName{Name: IPObjectName(ns, name)}, &ip); err != nil {
		return nil, "", fmt.Sprintf("pod %s/%s has no address yet", ns, name)
	}
	in, err := podInFromIP(&ip, &pod, r.State)
	if err != nil {
		return nil, "", fmt.Sprintf("pod %s/%s: %v", ns, name, err)
	}
	var out []topology.FloatingPair
	for _, f := range floating {
		for _, l := range in.IPs {
			if l.Is4() == f.Is4() {
				out = append(out, topology.FloatingPair{External: f, Logical: l})
			}
		}
	}
	if len(out) == 0 {
		return nil, in.Node, fmt.Sprintf("pod %s/%s has no address of the floating addresses' families", ns, name)
	}
	return out, in.Node, ""
}

func addrStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// fipPodKey indexes FloatingIPs by the pod they name.
const fipPodKey = "spec.pod"

// SetupWithManager: a FloatingIP follows its pod (created, deleted, re-addressed: the pod or
// its IP object changes) and its Subnet.
func (r *FloatingIPReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &kovnv1.FloatingIP{}, fipPodKey, func(o client.Object) []string {
		f := o.(*kovnv1.FloatingIP)
		return []string{f.Spec.Pod.Namespace + "/" + f.Spec.Pod.Name}
	})
	if err != nil {
		return err
	}
	byPod := func(ctx context.Context, key string) []reconcile.Request {
		var fips kovnv1.FloatingIPList
		if err := mgr.GetClient().List(ctx, &fips, client.MatchingFields{fipPodKey: key}); err != nil {
			return nil
		}
		return fipRequests(fips.Items)
	}
	bySubnet := func(ctx context.Context, o client.Object) []reconcile.Request {
		var fips kovnv1.FloatingIPList
		if err := mgr.GetClient().List(ctx, &fips); err != nil {
			return nil
		}
		return fipRequests(slices.DeleteFunc(fips.Items, func(f kovnv1.FloatingIP) bool { return f.Spec.Subnet != o.GetName() }))
	}
	return ctrl.NewControllerManagedBy(mgr).For(&kovnv1.FloatingIP{}).Named("floatingip").
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return byPod(ctx, o.GetNamespace()+"/"+o.GetName())
		})).
		Watches(&kovnv1.IP{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			ip := o.(*kovnv1.IP)
			if ip.Spec.PodName == "" {
				return nil
			}
			return byPod(ctx, ip.Spec.Namespace+"/"+ip.Spec.PodName)
		})).
		Watches(&kovnv1.Subnet{}, handler.EnqueueRequestsFromMapFunc(bySubnet)).
		Watches(&kovnv1.ProviderNetwork{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			var fips kovnv1.FloatingIPList
			if err := mgr.GetClient().List(ctx, &fips); err != nil {
				return nil
			}
			return fipRequests(fips.Items) // a node joining or leaving the network moves translations
		})).
		Complete(r)
}

func fipRequests(fips []kovnv1.FloatingIP) []reconcile.Request {
	out := make([]reconcile.Request, len(fips))
	for i := range fips {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: fips[i].Name}}
	}
	return out
}
