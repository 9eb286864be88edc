package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mnpv1 "github.com/kovn/kovn/api/mnp/v1beta1"
	nadv1 "github.com/kovn/kovn/api/nad/v1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/netattach"
)

// ReasonPolicyNotProgrammed: a policy kovn cannot program (a MultiNetworkPolicy naming no
// network, or one kovn does not plumb as OVN ports); what is programmed stays.
const ReasonPolicyNotProgrammed = "PolicyNotProgrammed"

// MultiNetworkPolicyReconciler programs each MultiNetworkPolicy (NPWG multi-network policy) as
// NetworkPolicy's ACLs (topology.ForNetworkPolicy) on a port group of the attachment ports its
// pods have on the networks its k8s.v1.cni.cncf.io/policy-for annotation names; peers are
// matched by their addresses on those networks. Only networks kovn plumbs as OVN ports (type
// kovn) can be policed; others are refused with an event. Addresses come from IP objects.
type MultiNetworkPolicyReconciler struct {
	client.Client
	State     *State
	NB        libovsdb.Client
	Recorder  record.EventRecorder
	Delegates netattach.DelegatePolicy
}

// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=multi-networkpolicies,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *MultiNetworkPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var mnp mnpv1.MultiNetworkPolicy
	if err := r.Get(ctx, req.NamespacedName, &mnp); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		return applyShard(ctx, r.NB, emptyShard(topology.OwnerMultiNetworkPolicy, req.Namespace+"/"+req.Name))
	}
	nets, err := r.networks(ctx, &mnp)
	if err != nil {
		// The last good ACLs stay: a typo in the annotation must not open the pods.
		r.event(&mnp, "%v; the policy's OVN ACLs stay as they are", err)
		return ctrl.Result{}, nil
	}
	in, err := r.policyIn(ctx, &mnp, nets)
	if err != nil {
		r.event(&mnp, "%v", err)
		return ctrl.Result{}, err
	}
	res, err := applyShard(ctx, r.NB, topology.ForNetworkPolicy(in))
	if err != nil {
		r.event(&mnp, "OVN ACLs not updated: %v", err)
	}
	return res, err
}

func (r *MultiNetworkPolicyReconciler) event(mnp *mnpv1.MultiNetworkPolicy, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(mnp, corev1.EventTypeWarning, ReasonPolicyNotProgrammed, format, args...)
	}
}

// networks are the definitions (namespace/name) the policy-for annotation names, each one kovn
// plumbs as OVN ports.
func (r *MultiNetworkPolicyReconciler) networks(ctx context.Context, mnp *mnpv1.MultiNetworkPolicy) ([]string, error) {
	value := strings.TrimSpace(mnp.Annotations[mnpv1.PolicyForAnnotation])
	if value == "" {
		return nil, fmt.Errorf("no %s annotation: the policy names no network", mnpv1.PolicyForAnnotation)
	}
	var out []string
	for _, f := range strings.Split(value, ",") {
		ns, name, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok {
			ns, name = mnp.Namespace, ns
		}
		key := ns + "/" + name
		var nad nadv1.NetworkAttachmentDefinition
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &nad); err != nil {
			return nil, fmt.Errorf("network %s: NetworkAttachmentDefinition: %v", key, err)
		}
		a, err := netattach.ParseNAD(key, nad.Spec.Config, r.Delegates)
		if err != nil {
			return nil, fmt.Errorf("network %s: %v", key, err)
		}
		if a.Kind != netattach.KindKovn {
			return nil, fmt.Errorf("network %s is plugged by %s, not as an OVN port: kovn cannot apply a policy to it", key, a.Plugin)
		}
		out = append(out, key)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// policyIn resolves the policy's selectors to attachment ports and addresses on nets.
func (r *MultiNetworkPolicyReconciler) policyIn(ctx context.Context, mnp *mnpv1.MultiNetworkPolicy, nets []string) (topology.NetworkPolicyIn, error) {
	in := topology.NetworkPolicyIn{Namespace: mnp.Namespace, Name: mnp.Name, Multi: true}
	// The families are the networks' (an attachment may be dual stack in a single-stack
	// cluster): JoinCIDRs only carries them to the compiler.
	for _, key := range nets {
		if sn, err := r.State.SubnetForNetwork(key); err == nil {
			in.JoinCIDRs = append(in.JoinCIDRs, sn.CIDRs...)
		}
	}
	in.Ingress, in.Egress = policyTypes(&networkingv1.NetworkPolicy{Spec: mnp.Spec})
	sel, err := metav1.LabelSelectorAsSelector(&mnp.Spec.PodSelector)
	if err != nil {
		return in, err
	}
	if in.Pods, err = attachedPods(ctx, r.Client, []string{mnp.Namespace}, sel, nets, true); err != nil {
		return in, err
	}
	for _, rule := range mnp.Spec.Ingress {
		ri, err := r.ruleIn(ctx, mnp.Namespace, nets, rule.From, rule.Ports)
		if err != nil {
			return in, err
		}
		in.IngressRules = append(in.IngressRules, ri)
	}
	for _, rule := range mnp.Spec.Egress {
		ri, err := r.ruleIn(ctx, mnp.Namespace, nets, rule.To, rule.Ports)
		if err != nil {
			return in, err
		}
		in.EgressRules = append(in.EgressRules, ri)
	}
	return in, nil
}

func (r *MultiNetworkPolicyReconciler) ruleIn(ctx context.Context, ns string, nets []string, peers []networkingv1.NetworkPolicyPeer,
	ports []networkingv1.NetworkPolicyPort) (topology.PolicyRuleIn, error) {
	ri := topology.PolicyRuleIn{AllPeers: len(peers) == 0, Ports: policyPortsIn(ports)}
	// Peer address sets name the networks: never shared with eth0's peers of the same selector.
	prefix := "networks=" + strings.Join(nets, ",") + ";"
	for _, peer := range peers {
		if peer.IPBlock != nil {
			b, err := ipBlockIn(peer.IPBlock)
			if err != nil {
				return ri, err
			}
			ri.IPBlocks = append(ri.IPBlocks, b)
			continue
		}
		podSel, nsSel, namespaces, err := peerSelectors(ns, peer)
		if err != nil {
			return ri, err
		}
		if nsSel != nil {
			if namespaces, err = namespacesIn(ctx, r.Client, nsSel); err != nil {
				return ri, err
			}
		}
		pp := topology.PolicyPeerIn{Selector: prefix + peerSelectorText(ns, podSel, nsSel)}
		if pp.Pods, err = attachedPods(ctx, r.Client, namespaces, podSel, nets, false); err != nil {
			return ri, err
		}
		ri.Peers = append(ri.Peers, pp)
	}
	if ri.AllPeers && hasNamedPort(ri.Ports) {
		pods, err := attachedPods(ctx, r.Client, nil, labels.Everything(), nets, false)
		if err != nil {
			return ri, err
		}
		ri.Pods = pods
	}
	return ri, nil
}

// peerSelectors parses a pod/namespace selector peer: a bare podSelector selects in ns.
func peerSelectors(ns string, peer networkingv1.NetworkPolicyPeer) (podSel, nsSel labels.Selector, namespaces []string, err error) {
	podSel = labels.Everything()
	if peer.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil {
			return nil, nil, nil, err
		}
	}
	if peer.NamespaceSelector == nil {
		return podSel, nil, []string{ns}, nil
	}
	nsSel, err = metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
	return podSel, nsSel, nil, err
}

func peerSelectorText(ns string, podSel, nsSel labels.Selector) string {
	if nsSel == nil {
		return topology.PeerSelector(ns, "", podSel.String(), true)
	}
	return topology.PeerSelector("", nsSel.String(), podSel.String(), false)
}

// namespacesIn are the names of the namespaces sel selects (never nil: none is an empty list).
func namespacesIn(ctx context.Context, c client.Reader, sel labels.Selector) ([]string, error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := []string{}
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	return out, nil
}

// attachedPods returns the pods of namespaces (nil: all) sel matches with their attachments on
// nets that kovn plumbs: each attachment's port (withPort) and addresses, from its IP object.
func attachedPods(ctx context.Context, c client.Reader, namespaces []string, sel labels.Selector, nets []string, withPort bool) ([]topology.PolicyPodIn, error) {
	if namespaces != nil && len(namespaces) == 0 {
		return nil, nil
	}
	lists := namespaces
	if lists == nil {
		lists = []string{""}
	}
	var out []topology.PolicyPodIn
	for _, ns := range lists {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			var ips kovnv1.IPList
			if err := c.List(ctx, &ips, client.MatchingFields{ipPodKey: podOwner(p.Namespace, p.Name)}); err != nil {
				return nil, err
			}
			for _, ip := range ips.Items {
				s := ip.Spec
				if s.Interface == "" || s.Delegated || !slices.Contains(nets, s.Network) || s.Namespace != p.Namespace ||
					s.PodName != p.Name || ip.Name != AttachmentIPName(p.Namespace, p.Name, s.Interface) {
					continue
				}
				addrs, err := s.Addrs()
				if err != nil {
					continue
				}
				in := topology.PolicyPodIn{IPs: addrs, NamedPorts: namedPorts(p)}
				if withPort {
					in.Port = ip.Name // the attachment's logical switch port
				}
				out = append(out, in)
			}
		}
	}
	return out, nil
}

// SetupWithManager watches policies, pods, IP objects, namespaces and definitions; every
// event re-queues the policies of its namespace and those with a namespace selector.
func (r *MultiNetworkPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	mapTo := func(f func(client.Object) string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.policiesFor(ctx, f(o))
		})
	}
	return ctrl.NewControllerManagedBy(mgr).Named("multinetworkpolicy").For(&mnpv1.MultiNetworkPolicy{}).
		Watches(&corev1.Pod{}, mapTo(client.Object.GetNamespace)).
		Watches(&kovnv1.IP{}, mapTo(func(o client.Object) string {
			if ip, ok := o.(*kovnv1.IP); ok && ip.Spec.Interface != "" {
				return ip.Spec.Namespace
			}
			return "-" // no policy's namespace: only those with a namespace selector
		})).
		Watches(&corev1.Namespace{}, mapTo(client.Object.GetName)).
		Watches(&nadv1.NetworkAttachmentDefinition{}, mapTo(func(client.Object) string { return "" })).
		Complete(r)
}

// policiesFor are the policies of namespace ns and those with a namespace selector ("": all).
func (r *MultiNetworkPolicyReconciler) policiesFor(ctx context.Context, ns string) []reconcile.Request {
	var list mnpv1.MultiNetworkPolicyList
	if err := r.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing multi-network policies")
		return nil
	}
	var out []reconcile.Request
	for _, p := range list.Items {
		np := networkingv1.NetworkPolicy{Spec: p.Spec}
		if ns == "" || p.Namespace == ns || usesNamespaceSelector(&np) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return out
}
