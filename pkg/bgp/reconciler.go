package bgp

import (
	"context"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/nodecond"
)

// +kubebuilder:rbac:groups=kovn.io,resources=bgppeers,verbs=get;list;watch
// +kubebuilder:rbac:groups=kovn.io,resources=bgppeers/status,verbs=get;patch
// +kubebuilder:rbac:groups=kovn.io,resources=subnets;ips,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services;pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// Passwords: only the Secrets of SecretsNamespace, never kube-system's.
// +kubebuilder:rbac:groups="",namespace=kovn-bgp,resources=secrets,verbs=get;list;watch

// SecretsNamespace holds the BgpPeers' password Secrets, and nothing else of kovn's: the
// speaker, which runs on every BGP node, may read the Secrets of this namespace only (RBAC
// cannot grant "the Secrets a BgpPeer names"; kube-system holds every component's
// credentials and kovn's CA). The chart creates it and keeps it on uninstall.
const SecretsNamespace = "kovn-bgp"

// Reconciler keeps one node's speaker equal to the cluster state: every event of any watched
// kind enqueues the same request, and a pass recomputes the sessions (PeersFor) and the routes
// (Desired) from the cache and hands both, whole, to the Speaker.
type Reconciler struct {
	client.Client
	Node            string
	Namespace       string // where the password Secrets are: SecretsNamespace
	ExternalIPCIDRs []netip.Prefix
	Speaker         Speaker

	mu     sync.Mutex
	plan   PeerPlan
	routes []Route
}

var speakerRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "speaker"}}

// SetupWithManager watches everything the routes and sessions derive from. Pods are watched
// as metadata only (the annotation), and the manager's cache holds only this node's.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{speakerRequest}
	})
	ownNode := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.Node })
	ownNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Namespace })
	return ctrl.NewControllerManagedBy(mgr).Named("bgp-speaker").
		Watches(&kovnv1.BgpPeer{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&kovnv1.Subnet{}, all).
		Watches(&kovnv1.IP{}, all).
		Watches(&corev1.Service{}, all).
		Watches(&discoveryv1.EndpointSlice{}, all).
		Watches(&corev1.Node{}, all, builder.WithPredicates(ownNode, nodecond.IgnoreHeartbeats)).
		Watches(&corev1.Secret{}, all, builder.WithPredicates(ownNamespace)).
		WatchesMetadata(&corev1.Pod{}, all).
		Complete(r)
}

func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	in, plan, err := r.gather(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Routes first: a speaker that starts (or restarts) has them before its first session.
	routes := Desired(in)
	prefixes := make([]netip.Prefix, len(routes))
	for i, rt := range routes {
		prefixes[i] = rt.Prefix
	}
	if err := r.Speaker.SetRoutes(ctx, prefixes); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Speaker.SetPeers(ctx, plan.Global, plan.Peers); err != nil {
		return ctrl.Result{}, err
	}
	r.mu.Lock()
	changed := !slices.Equal(routes, r.routes)
	r.plan, r.routes = plan, routes
	r.mu.Unlock()
	if changed {
		log.FromContext(ctx).Info("announcing", "routes", len(routes), "peers", len(plan.Peers), "refused", plan.Errors)
	}
	return ctrl.Result{}, nil
}

// gather lists the cluster state from the cache.
func (r *Reconciler) gather(ctx context.Context) (Input, PeerPlan, error) {
	in := Input{Node: r.Node, ExternalIPCIDRs: r.ExternalIPCIDRs, AnnotatedPods: map[types.NamespacedName]bool{}}
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: r.Node}, &node); err != nil && !apierrors.IsNotFound(err) {
		return in, PeerPlan{}, err
	}
	var peers kovnv1.BgpPeerList
	var subnets kovnv1.SubnetList
	var ips kovnv1.IPList
	var svcs corev1.ServiceList
	var slices discoveryv1.EndpointSliceList
	var secrets corev1.SecretList
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{&peers, nil}, {&subnets, nil}, {&ips, nil}, {&svcs, nil}, {&slices, nil},
		{&secrets, []client.ListOption{client.InNamespace(r.Namespace)}}, {pods, nil}} {
		if err := r.List(ctx, l.list, l.opts...); err != nil {
			return in, PeerPlan{}, err
		}
	}
	in.Subnets, in.IPs, in.Services, in.EndpointSlices = subnets.Items, ips.Items, svcs.Items, slices.Items
	for _, p := range pods.Items {
		if annotation.BGPPodRequested(p.Annotations[AnnotationBGP]) {
			in.AnnotatedPods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	byName := map[string]*corev1.Secret{}
	for i := range secrets.Items {
		byName[secrets.Items[i].Name] = &secrets.Items[i]
	}
	return in, PeersFor(&node, peers.Items, byName), nil
}

// Plan returns the last applied session plan and routes (for status and tests).
func (r *Reconciler) Plan() (PeerPlan, []Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan, r.routes
}
