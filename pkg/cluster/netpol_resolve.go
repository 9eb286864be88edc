package cluster

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
)

// podsIn returns the pods of the namespaces (nil: all) that sel matches and that kovn has
// addressed, with their addresses from their IP objects and their named container ports.
func podsIn(ctx context.Context, r client.Reader, namespaces []string, sel labels.Selector, withPort bool) ([]topology.PolicyPodIn, error) {
	var pods []corev1.Pod
	lists := namespaces
	if lists == nil {
		lists = []string{""}
	}
	for _, ns := range lists {
		var list corev1.PodList
		if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, err
		}
		pods = append(pods, list.Items...)
	}
	var out []topology.PolicyPodIn
	for i := range pods {
		p := &pods[i]
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var ip kovnv1.IP
		if err := r.Get(ctx, types.NamespacedName{Name: IPObjectName(p.Namespace, p.Name)}, &ip); err != nil {
			if apierrors.IsNotFound(err) {
				continue // not addressed yet: its IP object's event brings it in
			}
			return nil, err
		}
		addrs, err := ip.Spec.Addrs()
		if err != nil || ip.Spec.PodName != p.Name || ip.Spec.Namespace != p.Namespace {
			continue
		}
		in := topology.PolicyPodIn{IPs: addrs, NamedPorts: namedPorts(p)}
		if withPort {
			in.Port = contract.PodPortName(p.Namespace, p.Name)
		}
		out = append(out, in)
	}
	return out, nil
}

// podsInNamespaces returns the addressed pods podSel selects in the namespaces nsSel selects.
func podsInNamespaces(ctx context.Context, r client.Reader, nsSel, podSel labels.Selector, withPort bool) ([]topology.PolicyPodIn, error) {
	var list corev1.NamespaceList
	if err := r.List(ctx, &list, client.MatchingLabelsSelector{Selector: nsSel}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return podsIn(ctx, r, names, podSel, withPort)
}

func namedPorts(p *corev1.Pod) map[string]topology.NamedPortIn {
	out := map[string]topology.NamedPortIn{}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name != "" {
				out[cp.Name] = topology.NamedPortIn{Protocol: string(cp.Protocol), Port: cp.ContainerPort}
			}
		}
	}
	return out
}

func ipBlockIn(b *networkingv1.IPBlock) (topology.IPBlockIn, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return topology.IPBlockIn{}, err
	}
	in := topology.IPBlockIn{CIDR: cidr}
	for _, e := range b.Except {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return in, err
		}
		in.Except = append(in.Except, p)
	}
	return in, nil
}

func hasNamedPort(ports []topology.PolicyPortIn) bool {
	for _, p := range ports {
		if p.Name != "" {
			return true
		}
	}
	return false
}

// policiesFor maps a pod (or its IP object) to the policies that may select it or name it as
// a peer: those of its namespace, and those with a namespace selector anywhere. A pod event
// never re-queues the policies of other namespaces that cannot match it.
func (r *NetworkPolicyReconciler) policiesFor(ctx context.Context, ns string) []reconcile.Request {
	return r.policiesWhere(ctx, func(np *networkingv1.NetworkPolicy) bool {
		return np.Namespace == ns || usesNamespaceSelector(np)
	})
}

// clustersetPolicies are the policies with a clusterset-wide peer: the only ones another
// cluster's published pods can change.
func (r *NetworkPolicyReconciler) clustersetPolicies(ctx context.Context) []reconcile.Request {
	return r.policiesWhere(ctx, func(np *networkingv1.NetworkPolicy) bool { return len(clustersetSelectors(np)) > 0 })
}

// policiesWhere are the requests of the policies for which match is true.
func (r *NetworkPolicyReconciler) policiesWhere(ctx context.Context, match func(*networkingv1.NetworkPolicy) bool) []reconcile.Request {
	var list networkingv1.NetworkPolicyList
	if err := r.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing network policies")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if np := &list.Items[i]; match(np) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: np.Namespace, Name: np.Name}})
		}
	}
	return out
}

// clustersetSelectors are the policy's clusterset-wide namespace selectors.
func clustersetSelectors(np *networkingv1.NetworkPolicy) []*metav1.LabelSelector {
	var out []*metav1.LabelSelector
	for _, r := range np.Spec.Ingress {
		for _, p := range r.From {
			if clustersetWide(p.NamespaceSelector) {
				out = append(out, p.NamespaceSelector)
			}
		}
	}
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if clustersetWide(p.NamespaceSelector) {
				out = append(out, p.NamespaceSelector)
			}
		}
	}
	return out
}

// heldSpec is the policy as it is to be programmed. Its clusterset-wide selectors may name what
// is not there (an unknown cluster, a namespace not published): when its spec changed to that
// from one that resolved, the last good spec stays programmed (its peers still follow the
// pods); otherwise (a new policy, or the other cluster withdrew what the unchanged spec names)
// the peer selects nothing there. Either way the policy gets a Warning event saying what.
func (r *NetworkPolicyReconciler) heldSpec(np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	var warnings []string
	for _, sel := range clustersetSelectors(np) {
		warnings = append(warnings, clustersetPeerWarnings(sel, r.Peers)...)
	}
	key := np.Namespace + "/" + np.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastGood == nil {
		r.lastGood = map[string]goodSpec{}
	}
	good, had := r.lastGood[key]
	if len(warnings) == 0 {
		r.lastGood[key] = goodSpec{uid: np.UID, spec: *np.Spec.DeepCopy()}
		return np
	}
	slices.Sort(warnings)
	warnings = slices.Compact(warnings)
	msg := strings.Join(warnings, "; ")
	// Held only for what the edit brought: warnings the last good spec has too come from the
	// other cluster (a namespace withdrawn, a cluster gone), and an edit made meanwhile (say,
	// one that tightens the policy) must take effect.
	if had && good.uid == np.UID && !equality.Semantic.DeepEqual(good.spec, np.Spec) && r.newWarnings(good.spec, warnings) {
		r.event(np, "%s; the policy's last good spec stays programmed", msg)
		held := np.DeepCopy()
		held.Spec = *good.spec.DeepCopy()
		return held
	}
	r.event(np, "%s; the peer selects nothing there", msg)
	return np
}

// newWarnings says whether warnings holds one the spec good would not give now.
func (r *NetworkPolicyReconciler) newWarnings(good networkingv1.NetworkPolicySpec, warnings []string) bool {
	var had []string
	for _, sel := range clustersetSelectors(&networkingv1.NetworkPolicy{Spec: good}) {
		had = append(had, clustersetPeerWarnings(sel, r.Peers)...)
	}
	for _, w := range warnings {
		if !slices.Contains(had, w) {
			return true
		}
	}
	return false
}

// goodSpec is a policy's last spec whose clusterset peers all resolved.
type goodSpec struct {
	uid  types.UID
	spec networkingv1.NetworkPolicySpec
}

func (r *NetworkPolicyReconciler) event(np *networkingv1.NetworkPolicy, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(np, corev1.EventTypeWarning, "ClustersetPeerUnresolved", format, args...)
	}
}

func usesNamespaceSelector(np *networkingv1.NetworkPolicy) bool {
	for _, r := range np.Spec.Ingress {
		for _, p := range r.From {
			if p.NamespaceSelector != nil {
				return true
			}
		}
	}
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.NamespaceSelector != nil {
				return true
			}
		}
	}
	return false
}

// SetupWithManager watches policies, pods, their IP objects and namespaces.
func (r *NetworkPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byPod := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.policiesFor(ctx, o.GetNamespace())
	})
	byIP := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		ip, ok := o.(*kovnv1.IP)
		if !ok || ip.Spec.PodName == "" {
			return nil
		}
		return r.policiesFor(ctx, ip.Spec.Namespace)
	})
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.policiesFor(ctx, o.GetName())
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("networkpolicy").For(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, byPod).Watches(&kovnv1.IP{}, byIP).Watches(&corev1.Namespace{}, byNamespace)
	if r.Peers != nil {
		b = b.WatchesRawSource(peersSource(r.Peers, func(ctx context.Context) []reconcile.Request {
			return r.clustersetPolicies(ctx)
		}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Complete(r)
}
