package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "github.com/kovn/kovn/api/policy/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// ClusterNetworkPolicyReconciler programs every ClusterNetworkPolicy as OVN ACLs in the Admin
// and Baseline priority bands (topology.ForClusterNetworkPolicies). The policies are judged
// together (a policy's ACL priorities follow from the others', an Admin Pass rule cuts into
// every Admin rule after it), so one reconcile compiles them all; each policy's rows are its
// own shard, written only when the policy resolved, so a policy gone bad keeps its last good
// ACLs. Pod addresses come from IP objects, never from what a pod says about itself.
type ClusterNetworkPolicyReconciler struct {
	client.Client
	State    *State
	NB       libovsdb.Client
	Recorder record.EventRecorder

	mu sync.Mutex
	// lastGood is each policy's last spec that resolved (by UID): a spec gone bad is replaced
	// by it, so its ACLs keep following pods as the last good spec says.
	lastGood map[types.UID]policyv1.ClusterNetworkPolicySpec
	// programmed are the policies whose shards this controller wrote.
	programmed map[string]bool
	// Peers are the other clusters' published pods (nil: no clusterset).
	Peers ClustersetPeers
	// selected are the pods each selection resolved to in the running reconcile; trust what
	// remote addresses it admits (read once per reconcile, when needed).
	selected map[string][]topology.PolicyPodIn
	trust    *remoteTrust
}

// clusterPoliciesKey is the one request every event maps to: bursts of pod events coalesce.
var clusterPoliciesKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "clusternetworkpolicies"}}

// +kubebuilder:rbac:groups=policy.networking.k8s.io,resources=clusternetworkpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.networking.k8s.io,resources=clusternetworkpolicies/status,verbs=get;patch;update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile implements reconcile.Reconciler.
func (r *ClusterNetworkPolicyReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.selected, r.trust = map[string][]topology.PolicyPodIn{}, nil
	var list policyv1.ClusterNetworkPolicyList
	if err := r.List(ctx, &list); err != nil {
		return ctrl.Result{}, err
	}
	if r.Peers != nil && !r.Peers.Ready() && slices.ContainsFunc(list.Items, cnpClustersetWide) {
		// Until the clusterset store was read once, leave every policy as programmed.
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	in := topology.ClusterPoliciesIn{}
	if join := r.State.Join(); join != nil {
		in.JoinCIDRs = join.CIDRs
	}
	verdicts := map[string]*cnpVerdict{}
	for i := range list.Items {
		p := &list.Items[i]
		pin, v, err := r.resolvePolicy(ctx, p)
		if err != nil {
			return ctrl.Result{}, err
		}
		verdicts[p.Name] = v
		in.Policies = append(in.Policies, pin)
	}
	shards, compileErrs := topology.ForClusterNetworkPolicies(in)
	res, failed := r.apply(ctx, in.Policies, shards, compileErrs, verdicts)
	if err := r.dropGone(ctx, list.Items); err != nil {
		failed = append(failed, err)
	}
	for i := range list.Items {
		if err := r.writeStatus(ctx, &list.Items[i], verdicts[list.Items[i].Name]); err != nil {
			failed = append(failed, err)
		}
	}
	return res, errors.Join(failed...)
}

// apply writes each policy's shard and records the outcome in its verdict. A policy without
// a shard keeps its rows: it did not resolve, it is held by one before it, or it does not
// fit (compileErrs says which).
func (r *ClusterNetworkPolicyReconciler) apply(ctx context.Context, pols []topology.ClusterPolicyIn, shards map[string]topology.Shard,
	compileErrs map[string]error, verdicts map[string]*cnpVerdict) (ctrl.Result, []error) {
	var res ctrl.Result
	var failed []error
	for _, p := range pols {
		v := verdicts[p.Name]
		sh, ok := shards[p.Name]
		var held *topology.HeldError
		switch {
		case errors.As(compileErrs[p.Name], &held):
			v.ready, v.reason, v.msg = false, "Held", held.Error()
		case compileErrs[p.Name] != nil:
			v.ready, v.reason, v.msg = false, "NotProgrammable", compileErrs[p.Name].Error()
		case !ok:
			// Neither the spec nor a last good one resolved: resolvePolicy said so.
		default:
			got, err := applyShard(ctx, r.NB, sh)
			switch {
			case err != nil:
				v.ready, v.reason, v.msg = false, kovnv1.ReasonReconcileFailed, fmt.Sprintf("OVN ACLs not updated: %v", err)
				failed = append(failed, err)
			case got.RequeueAfter > 0:
				// A selected pod's switch port is not there yet (nbsync.ErrParentMissing): the
				// rest of the shard is written.
				r.programmed[p.Name] = true
				v.ready, v.reason, v.msg = false, kovnv1.ReasonReconciling, "waiting for the switch port of a selected pod"
				res.RequeueAfter = max(res.RequeueAfter, got.RequeueAfter)
			default:
				r.programmed[p.Name] = true
				v.ready, v.reason, v.msg = true, kovnv1.ReasonReconciled, fmt.Sprintf("%d ACLs programmed", len(sh.ACLs))
			}
		}
	}
	return res, failed
}

// cnpVerdict is what one reconcile found about a policy, for its conditions.
type cnpVerdict struct {
	valid       bool
	validMsg    string
	unsupported string // fields kovn does not implement (they match no traffic)
	ready       bool
	reason, msg string
	lastGood    bool // the last good spec was programmed instead
}

// resolvePolicy resolves p's spec, or its last good spec when p's does not resolve. The
// returned ClusterPolicyIn has Keep set when neither does (no shard: its rows stay).
func (r *ClusterNetworkPolicyReconciler) resolvePolicy(ctx context.Context, p *policyv1.ClusterNetworkPolicy) (topology.ClusterPolicyIn, *cnpVerdict, error) {
	if r.lastGood == nil {
		r.lastGood, r.programmed = map[types.UID]policyv1.ClusterNetworkPolicySpec{}, map[string]bool{}
	}
	v := &cnpVerdict{valid: true, reason: kovnv1.ReasonReconciling, msg: "not programmed yet"}
	pin, unsupported, err := r.policyIn(ctx, p.Name, &p.Spec)
	var invalid *cnpInvalid
	switch {
	case err == nil:
		r.lastGood[p.UID] = *p.Spec.DeepCopy()
		v.unsupported = unsupported
		return pin, v, nil
	case !errors.As(err, &invalid):
		return pin, v, err
	}
	v.valid, v.validMsg = false, invalid.Error()
	good, ok := r.lastGood[p.UID]
	if !ok {
		v.reason, v.msg = kovnv1.ReasonValidationFailed, "the spec is invalid and no earlier spec was programmed by this controller: the policy's ACLs stay as they are"
		return topology.ClusterPolicyIn{Name: p.Name, Admin: p.Spec.Tier == policyv1.AdminTier, Priority: p.Spec.Priority, Keep: true,
			Width: max(len(p.Spec.Ingress), len(p.Spec.Egress))}, v, nil
	}
	pin, v.unsupported, err = r.policyIn(ctx, p.Name, &good)
	v.lastGood = true
	return pin, v, err
}

func (r *ClusterNetworkPolicyReconciler) writeStatus(ctx context.Context, p *policyv1.ClusterNetworkPolicy, v *cnpVerdict) error {
	before := p.DeepCopy()
	conds := &p.Status.Conditions
	if v.valid {
		kovnv1.SetCondition(conds, p.Generation, kovnv1.ConditionValidated, true, kovnv1.ReasonValid, "spec is valid")
	} else {
		msg := v.validMsg
		if v.lastGood {
			msg += "; the last good spec stays programmed"
		}
		kovnv1.SetCondition(conds, p.Generation, kovnv1.ConditionValidated, false, "InvalidSpec", msg)
	}
	if v.unsupported != "" {
		kovnv1.SetCondition(conds, p.Generation, kovnv1.ConditionSupported, false, kovnv1.ReasonNotImplemented, v.unsupported)
	} else {
		kovnv1.SetCondition(conds, p.Generation, kovnv1.ConditionSupported, true, kovnv1.ReasonImplemented, "every field of the spec is implemented")
	}
	kovnv1.SetCondition(conds, p.Generation, kovnv1.ConditionReady, v.ready, v.reason, v.msg)
	if equality.Semantic.DeepEqual(before.Status, p.Status) {
		return nil
	}
	if !v.ready && r.Recorder != nil && v.reason != kovnv1.ReasonReconciling {
		r.Recorder.Eventf(p, corev1.EventTypeWarning, "PolicyNotProgrammed", "%s", v.msg)
	}
	return client.IgnoreNotFound(r.Status().Patch(ctx, p, client.MergeFrom(before)))
}

// dropGone empties the shards of policies deleted since this controller programmed them (the
// OrphanCollector removes those deleted while no controller ran) and forgets their last good
// specs.
func (r *ClusterNetworkPolicyReconciler) dropGone(ctx context.Context, live []policyv1.ClusterNetworkPolicy) error {
	uids, names := map[types.UID]bool{}, map[string]bool{}
	for _, p := range live {
		uids[p.UID], names[p.Name] = true, true
	}
	for uid := range maps.Clone(r.lastGood) {
		if !uids[uid] {
			delete(r.lastGood, uid)
		}
	}
	for name := range maps.Clone(r.programmed) {
		if names[name] {
			continue
		}
		if _, err := applyShard(ctx, r.NB, emptyShard(topology.OwnerClusterNetworkPolicy, name)); err != nil {
			return err
		}
		delete(r.programmed, name)
	}
	return nil
}

// cnpInvalid is a spec that does not resolve (a selector that does not parse).
type cnpInvalid struct{ err error }

func (e *cnpInvalid) Error() string { return e.err.Error() }

// policyIn resolves spec's selectors against the cached pods, namespaces and nodes.
// unsupported names the fields kovn compiles as matching nothing.
func (r *ClusterNetworkPolicyReconciler) policyIn(ctx context.Context, name string, spec *policyv1.ClusterNetworkPolicySpec) (topology.ClusterPolicyIn, string, error) {
	in := topology.ClusterPolicyIn{Name: name, Admin: spec.Tier == policyv1.AdminTier, Priority: spec.Priority}
	var err error
	if in.Subject, err = r.selectPods(ctx, spec.Subject.Namespaces, spec.Subject.Pods, true); err != nil {
		return in, "", err
	}
	var unsupported []string
	for i, rule := range spec.Ingress {
		ri := topology.ClusterRuleIn{Action: string(rule.Action), Protocols: protocolsIn(rule.Protocols)}
		for _, peer := range rule.From {
			if err := r.addPodPeer(ctx, &ri, peer.Namespaces, peer.Pods); err != nil {
				return in, "", fmt.Errorf("ingress rule %d: %w", i, err)
			}
		}
		in.Ingress = append(in.Ingress, ri)
	}
	for i, rule := range spec.Egress {
		ri := topology.ClusterRuleIn{Action: string(rule.Action), Protocols: protocolsIn(rule.Protocols)}
		for _, peer := range rule.To {
			if err := r.addEgressPeer(ctx, &ri, peer); err != nil {
				return in, "", fmt.Errorf("egress rule %d: %w", i, err)
			}
			if len(peer.DomainNames) > 0 {
				unsupported = append(unsupported, fmt.Sprintf("egress rule %d: domainNames peers match no traffic (kovn does not implement them)", i))
			}
		}
		in.Egress = append(in.Egress, ri)
	}
	return in, strings.Join(unsupported, "; "), nil
}

func (r *ClusterNetworkPolicyReconciler) addEgressPeer(ctx context.Context, ri *topology.ClusterRuleIn, peer policyv1.ClusterNetworkPolicyEgressPeer) error {
	if err := r.addPodPeer(ctx, ri, peer.Namespaces, peer.Pods); err != nil {
		return err
	}
	for _, c := range peer.Networks {
		// The CRD kovn ships has no CEL check of these (deploy/crds: Kubernetes 1.31 refuses its cost).
		p, err := netip.ParsePrefix(string(c))
		if err != nil {
			return &cnpInvalid{fmt.Errorf("network %q: %v", c, err)}
		}
		if p != p.Masked() {
			return &cnpInvalid{fmt.Errorf("network %q has address bits set beyond /%d (%s)", c, p.Bits(), p.Masked())}
		}
		ri.PeerPrefixes = append(ri.PeerPrefixes, p)
	}
	if peer.Nodes == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(peer.Nodes)
	if err != nil {
		return &cnpInvalid{fmt.Errorf("nodes selector: %v", err)}
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) {
				ri.PeerPrefixes = append(ri.PeerPrefixes, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return nil
}

// addPodPeer adds the pods a namespaces or pods peer selects (neither set: nothing).
func (r *ClusterNetworkPolicyReconciler) addPodPeer(ctx context.Context, ri *topology.ClusterRuleIn, ns *metav1.LabelSelector, pods *policyv1.NamespacedPod) error {
	if ns == nil && pods == nil {
		return nil
	}
	if ri.Action != string(policyv1.ClusterNetworkPolicyRuleActionAccept) && (clustersetWide(ns) || pods != nil && clustersetWide(&pods.NamespaceSelector)) {
		// Each cluster publishes its own pods: one could leave a Deny by not publishing.
		return &cnpInvalid{fmt.Errorf("a %s rule cannot select pods of other clusters by labels (%s): a cluster could leave it by not publishing them; name their networks instead",
			ri.Action, annotation.ClusterLabel)}
	}
	selected, err := r.selectPods(ctx, ns, pods, false)
	if err != nil {
		return err
	}
	ri.PeerPods = append(ri.PeerPods, selected...)
	return nil
}

// selectPods returns the addressed pods of the namespaces ns selects, or those pods selects.
func (r *ClusterNetworkPolicyReconciler) selectPods(ctx context.Context, ns *metav1.LabelSelector, pods *policyv1.NamespacedPod, withPort bool) ([]topology.PolicyPodIn, error) {
	nsSel, podSel := ns, (*metav1.LabelSelector)(nil)
	if pods != nil {
		nsSel, podSel = &pods.NamespaceSelector, &pods.PodSelector
	}
	if nsSel == nil {
		return nil, nil
	}
	nss, err := metav1.LabelSelectorAsSelector(nsSel)
	if err != nil {
		return nil, &cnpInvalid{fmt.Errorf("namespace selector: %v", err)}
	}
	ps := labels.Everything()
	if podSel != nil {
		if ps, err = metav1.LabelSelectorAsSelector(podSel); err != nil {
			return nil, &cnpInvalid{fmt.Errorf("pod selector: %v", err)}
		}
	}
	// Policies and rules often select the same pods (every namespace, a tenant's): each
	// selection is listed once per reconcile.
	key := fmt.Sprintf("%s|%s|%t", nss, ps, withPort)
	if got, ok := r.selected[key]; ok {
		return got, nil
	}
	var got []topology.PolicyPodIn
	if clustersetWide(nsSel) {
		if r.trust == nil {
			t, err := remoteTrustFor(ctx, r.Client, r.State)
			if err != nil {
				return nil, err
			}
			r.trust = &t
		}
		got, err = podsInClusterset(ctx, r.Client, r.Peers, *r.trust, nss, ps, withPort)
	} else {
		got, err = podsInNamespaces(ctx, r.Client, nss, ps, withPort)
	}
	if err == nil {
		r.selected[key] = got
	}
	return got, err
}

// cnpClustersetWide says whether a policy has a clusterset-wide namespace selector anywhere.
func cnpClustersetWide(p policyv1.ClusterNetworkPolicy) bool {
	wide := func(ns *metav1.LabelSelector, pods *policyv1.NamespacedPod) bool {
		return clustersetWide(ns) || pods != nil && clustersetWide(&pods.NamespaceSelector)
	}
	if wide(p.Spec.Subject.Namespaces, p.Spec.Subject.Pods) {
		return true
	}
	for _, r := range p.Spec.Ingress {
		for _, peer := range r.From {
			if wide(peer.Namespaces, peer.Pods) {
				return true
			}
		}
	}
	for _, r := range p.Spec.Egress {
		for _, peer := range r.To {
			if wide(peer.Namespaces, peer.Pods) {
				return true
			}
		}
	}
	return false
}

func protocolsIn(ps []policyv1.ClusterNetworkPolicyProtocol) []topology.ClusterProtocolIn {
	var out []topology.ClusterProtocolIn
	for _, p := range ps {
		var proto string
		var port *policyv1.Port
		switch {
		case p.DestinationNamedPort != "":
			out = append(out, topology.ClusterProtocolIn{NamedPort: p.DestinationNamedPort})
			continue
		case p.TCP != nil:
			proto, port = "TCP", p.TCP.DestinationPort
		case p.UDP != nil:
			proto, port = "UDP", p.UDP.DestinationPort
		case p.SCTP != nil:
			proto, port = "SCTP", p.SCTP.DestinationPort
		default:
			continue
		}
		pi := topology.ClusterProtocolIn{Protocol: proto}
		switch {
		case port == nil:
		case port.Range != nil:
			pi.Start, pi.End = port.Range.Start, port.Range.End
		default:
			pi.Start, pi.End = port.Number, port.Number
		}
		out = append(out, pi)
	}
	return out
}

// SetupWithManager maps every event that can change a policy's pods, namespaces or nodes to
// the one request that compiles them all.
func (r *ClusterNetworkPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{clusterPoliciesKey}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("clusternetworkpolicy").
		Watches(&policyv1.ClusterNetworkPolicy{}, all).Watches(&corev1.Pod{}, all).Watches(&kovnv1.IP{}, all).
		Watches(&corev1.Namespace{}, all).Watches(&corev1.Node{}, all)
	if r.Peers != nil {
		b = b.WatchesRawSource(peersSource(r.Peers, func(context.Context) []reconcile.Request {
			return []reconcile.Request{clusterPoliciesKey}
		}))
	}
	return b.Complete(r)
}
