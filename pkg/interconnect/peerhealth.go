package interconnect

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
)

// publishPeerGateways tells this cluster's gateway nodes where the other clusters' gateways
// are: each node's daemon runs a BFD session toward each (peerprobe), which the load
// balancers follow (PeerHealth) without waiting for the clusterset store. While IC-SB cannot
// be read the annotation stays as last written.
func (r *Reconciler) publishPeerGateways(ctx context.Context, run *joinRun) error {
	peers := map[string][]netip.Addr{}
	for az, addrs := range run.cs.tunnelAddrs {
		if az != run.in.AZ && az != run.renamedFrom && run.cs.members[az] { // foreign AZs run no probes
			peers[az] = addrs
		}
	}
	return r.annotateGateways(ctx, run.nodes, run.gateways, annotation.ICPeerGateways, annotation.FormatPeerGateways(peers))
}

// PeerHealth says which AZs of the clusterset this cluster cannot reach now: every gateway
// node that probes an AZ (annotation.ICPeerGateways) reports it down (annotation.ICPeersDown).
// One gateway that still reaches it is enough (the transit port moves to it if its own link
// is what failed).
type PeerHealth struct {
	mu          sync.Mutex
	unreachable map[string]bool
	onChange    []func()
}

// NewPeerHealth is a PeerHealth with every AZ reachable.
func NewPeerHealth() *PeerHealth { return &PeerHealth{unreachable: map[string]bool{}} }

// Unreachable says whether az is cut off from this cluster.
func (h *PeerHealth) Unreachable(az string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unreachable[az]
}

// OnChange has f called (without locks held) whenever the unreachable AZs change.
func (h *PeerHealth) OnChange(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onChange = append(h.onChange, f)
}

// set records the unreachable AZs; it returns the AZs that became unreachable and those that
// became reachable again, and calls the OnChange functions if any did.
func (h *PeerHealth) set(next map[string]bool) (lost, back []string) {
	h.mu.Lock()
	for az := range next {
		if !h.unreachable[az] {
			lost = append(lost, az)
		}
	}
	for az := range h.unreachable {
		if !next[az] {
			back = append(back, az)
		}
	}
	h.unreachable = maps.Clone(next)
	fs := slices.Clone(h.onChange)
	h.mu.Unlock()
	if len(lost)+len(back) > 0 {
		for _, f := range fs {
			f()
		}
	}
	slices.Sort(lost)
	slices.Sort(back)
	return lost, back
}

// unreachableAZs are the AZs every probing gateway node reports down.
func unreachableAZs(nodes []corev1.Node) map[string]bool {
	probing, down := map[string]int{}, map[string]int{}
	for _, n := range nodes {
		peers, err := annotation.ParsePeerGateways(n.Annotations[annotation.ICPeerGateways])
		if err != nil {
			continue
		}
		for az := range peers {
			probing[az]++
		}
		for _, az := range annotation.ParsePeersDown(n.Annotations[annotation.ICPeersDown]) {
			if _, ok := peers[az]; ok {
				down[az]++
			}
		}
	}
	out := map[string]bool{}
	for az, n := range probing {
		if down[az] == n {
			out[az] = true
		}
	}
	return out
}

// PeerHealthReconciler keeps a PeerHealth from the gateway nodes' reports, and says on the
// InterConnect, by events, when an AZ is cut off and when it is back.
type PeerHealthReconciler struct {
	client.Client
	Health   *PeerHealth
	Recorder record.EventRecorder
}

// Reconcile implements reconcile.Reconciler (one key: the whole set of nodes).
func (r *PeerHealthReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, err
	}
	lost, back := r.Health.set(unreachableAZs(nodes.Items))
	if r.Recorder == nil || len(lost)+len(back) == 0 {
		return ctrl.Result{}, nil
	}
	ic := &kovnv1.InterConnect{}
	if err := r.Get(ctx, types.NamespacedName{Name: Name}, ic); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(lost) > 0 {
		r.Recorder.Event(ic, corev1.EventTypeWarning, "PeerUnreachable", fmt.Sprintf(
			"every BFD session from this cluster's gateways to %s's gateways is down: its imported endpoints are left out of the load balancers",
			strings.Join(lost, ", ")))
	}
	if len(back) > 0 {
		r.Recorder.Event(ic, corev1.EventTypeNormal, "PeerReachable", fmt.Sprintf(
			"a BFD session to %s's gateways is up again: its imported endpoints are back", strings.Join(back, ", ")))
	}
	return ctrl.Result{}, nil
}

// SetupWithManager reconciles when a node's probe annotations change.
func (r *PeerHealthReconciler) SetupWithManager(mgr ctrl.Manager) error {
	probes := func(o client.Object) string {
		a := o.GetAnnotations()
		return a[annotation.ICPeerGateways] + "|" + a[annotation.ICPeersDown]
	}
	changed := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return probes(e.ObjectOld) != probes(e.ObjectNew) }}
	key := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "peers"}}}
	return ctrl.NewControllerManagedBy(mgr).Named("ic-peer-health").
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return key }),
			builder.WithPredicates(changed)).
		Complete(r)
}
