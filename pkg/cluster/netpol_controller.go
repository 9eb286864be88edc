package cluster

import (
	"context"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// NetworkPolicyReconciler programs each NetworkPolicy as OVN ACLs on a port group of the pods
// it selects (topology.ForNetworkPolicy). Pod addresses come from IP objects, which only the
// controller writes, never from what a pod says about itself.
type NetworkPolicyReconciler struct {
	client.Client
	State    *State
	NB       libovsdb.Client
	Recorder record.EventRecorder
	// Peers are the other clusters' published pods (nil: no clusterset).
	Peers ClustersetPeers

	mu sync.Mutex
	// lastGood is each policy's last spec whose clusterset peers resolved (heldSpec).
	lastGood map[string]goodSpec
}

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *NetworkPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	owner := req.Namespace + "/" + req.Name
	var np networkingv1.NetworkPolicy
	if err := r.Get(ctx, req.NamespacedName, &np); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		if res, err := applyShard(ctx, r.NB, emptyShard(topology.OwnerNetworkPolicy, owner)); err != nil || !res.IsZero() {
			return res, err
		}
		r.mu.Lock()
		delete(r.lastGood, owner)
		r.mu.Unlock()
		return r.dropUnusedLogMeter(ctx, req.Namespace)
	}
	if r.Peers != nil && !r.Peers.Ready() && len(clustersetSelectors(&np)) > 0 {
		// Until the clusterset store was read once, the policy stays as programmed: a new
		// leader must not drop its remote (and, by the cluster label, local) peers meanwhile.
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	in, err := r.policyIn(ctx, r.heldSpec(&np))
	if err != nil {
		if r.Recorder != nil {
			r.Recorder.Eventf(&np, corev1.EventTypeWarning, "PolicyNotProgrammed", "%v", err)
		}
		return ctrl.Result{}, err
	}
	if in.Logging.Deny != "" || in.Logging.Allow != "" {
		// The namespace's meter before the ACLs naming it (an ACL naming no meter would log
		// unmetered). It stays when logging is turned off: other policies of the namespace
		// may still name it until they are reconciled.
		if res, err := applyShard(ctx, r.NB, topology.ForNamespaceLogMeter(np.Namespace, r.State.Opts.ACLLogRate)); err != nil || !res.IsZero() {
			return res, err
		}
	}
	res, err := applyShard(ctx, r.NB, topology.ForNetworkPolicy(in))
	if err != nil && r.Recorder != nil {
		r.Recorder.Eventf(&np, corev1.EventTypeWarning, "PolicyNotProgrammed", "OVN ACLs not updated: %v", err)
	}
	return res, err
}

// dropUnusedLogMeter removes namespace ns's ACL log meter once its last NetworkPolicy is gone
// (the namespace deleted, or its policies): no ACL names it any more, and meters would
// otherwise pile up in NB with every namespace that ever logged.
func (r *NetworkPolicyReconciler) dropUnusedLogMeter(ctx context.Context, ns string) (ctrl.Result, error) {
	var left networkingv1.NetworkPolicyList
	if err := r.List(ctx, &left, client.InNamespace(ns), client.Limit(1)); err != nil || len(left.Items) > 0 {
		return ctrl.Result{}, err
	}
	return applyShard(ctx, r.NB, emptyShard(topology.OwnerACLLogging, topology.NamespaceLogMeterOwner(ns)))
}

// policyIn resolves the policy's selectors against the cached pods and namespaces.
func (r *NetworkPolicyReconciler) policyIn(ctx context.Context, np *networkingv1.NetworkPolicy) (topology.NetworkPolicyIn, error) {
	in := topology.NetworkPolicyIn{Namespace: np.Namespace, Name: np.Name}
	if join := r.State.Join(); join != nil {
		in.JoinCIDRs = join.CIDRs
	}
	var err error
	if in.Logging, err = r.logging(ctx, np); err != nil {
		return in, err
	}
	in.Ingress, in.Egress = policyTypes(np)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return in, err
	}
	if in.Pods, err = podsIn(ctx, r.Client, []string{np.Namespace}, sel, true); err != nil {
		return in, err
	}
	for _, rule := range np.Spec.Ingress {
		ri, err := r.ruleIn(ctx, np.Namespace, rule.From, rule.Ports)
		if err != nil {
			return in, err
		}
		in.IngressRules = append(in.IngressRules, ri)
	}
	for _, rule := range np.Spec.Egress {
		ri, err := r.ruleIn(ctx, np.Namespace, rule.To, rule.Ports)
		if err != nil {
			return in, err
		}
		in.EgressRules = append(in.EgressRules, ri)
	}
	return in, nil
}

// policyTypes defaults spec.policyTypes as the API documents: Ingress always, Egress when the
// policy has egress rules.
func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		ingress = ingress || t == networkingv1.PolicyTypeIngress
		egress = egress || t == networkingv1.PolicyTypeEgress
	}
	return ingress, egress
}

func (r *NetworkPolicyReconciler) ruleIn(ctx context.Context, ns string, peers []networkingv1.NetworkPolicyPeer,
	ports []networkingv1.NetworkPolicyPort) (topology.PolicyRuleIn, error) {
	ri := topology.PolicyRuleIn{AllPeers: len(peers) == 0, Ports: policyPortsIn(ports)}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			b, err := ipBlockIn(peer.IPBlock)
			if err != nil {
				return ri, err
			}
			ri.IPBlocks = append(ri.IPBlocks, b)
			continue
		}
		pp, err := r.peerIn(ctx, ns, peer)
		if err != nil {
			return ri, err
		}
		ri.Peers = append(ri.Peers, pp)
	}
	if ri.AllPeers && hasNamedPort(ri.Ports) {
		// Egress to every destination by a named port: the names resolve on every pod.
		pods, err := podsIn(ctx, r.Client, nil, labels.Everything(), false)
		if err != nil {
			return ri, err
		}
		ri.Pods = pods
	}
	return ri, nil
}

// policyPortsIn is a rule's ports as the compiler takes them (protocol TCP when unset).
func policyPortsIn(ports []networkingv1.NetworkPolicyPort) []topology.PolicyPortIn {
	var out []topology.PolicyPortIn
	for _, p := range ports {
		pi := topology.PolicyPortIn{Protocol: "TCP"}
		if p.Protocol != nil {
			pi.Protocol = string(*p.Protocol)
		}
		if p.Port != nil {
			if p.Port.Type == 0 {
				pi.Port = p.Port.IntVal
			} else {
				pi.Name = p.Port.StrVal
			}
		}
		if p.EndPort != nil {
			pi.EndPort = *p.EndPort
		}
		out = append(out, pi)
	}
	return out
}

// peerIn resolves a pod/namespace selector peer: podSelector alone selects in the policy's
// namespace, namespaceSelector picks namespaces, both together both. Its Selector text is
// canonical, so policies with equal peers share their address sets.
func (r *NetworkPolicyReconciler) peerIn(ctx context.Context, ns string, peer networkingv1.NetworkPolicyPeer) (topology.PolicyPeerIn, error) {
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			return topology.PolicyPeerIn{}, err
		}
		podSel = s
	}
	if peer.NamespaceSelector == nil {
		pods, err := podsIn(ctx, r.Client, []string{ns}, podSel, false)
		return topology.PolicyPeerIn{Selector: topology.PeerSelector(ns, "", podSel.String(), true), Pods: pods}, err
	}
	nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
	if err != nil {
		return topology.PolicyPeerIn{}, err
	}
	// A clusterset-wide selector's text names the cluster label, so its shared address set
	// is never a local selector's.
	out := topology.PolicyPeerIn{Selector: topology.PeerSelector("", nsSel.String(), podSel.String(), false)}
	if clustersetWide(peer.NamespaceSelector) {
		trust, err := remoteTrustFor(ctx, r.Client, r.State)
		if err != nil {
			return out, err
		}
		out.Pods, err = podsInClusterset(ctx, r.Client, r.Peers, trust, nsSel, podSel, false)
		return out, err
	}
	out.Pods, err = podsInNamespaces(ctx, r.Client, nsSel, podSel, false)
	return out, err
}

// logging reads the namespace's ACL logging annotation. A value that does not parse is an
// event on the namespace and keeps what the policy's ACLs log now.
func (r *NetworkPolicyReconciler) logging(ctx context.Context, np *networkingv1.NetworkPolicy) (topology.ACLLogging, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: np.Namespace}, &ns); err != nil {
		return topology.ACLLogging{}, client.IgnoreNotFound(err)
	}
	deny, allow, err := annotation.ParseACLLogging(ns.Annotations[annotation.ACLLogging])
	if err == nil {
		return topology.ACLLogging{Deny: deny, Allow: allow}, nil
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(&ns, corev1.EventTypeWarning, "InvalidACLLogging", "%v; the policies' logging stays as it is", err)
	}
	return nbsync.ProgrammedACLLogging(ctx, r.NB, np.Namespace, np.Name)
}
