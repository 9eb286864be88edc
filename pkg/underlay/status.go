package underlay

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// writeStatus writes this node's entry of every ProviderNetwork whose entry is not what it
// should be: the outcome where the node takes part, nothing where it does not (excluded). Each
// node's daemon owns its own list elements (server-side apply, one field manager per node).
func (r *Reconciler) writeStatus(ctx context.Context, pns []kovnv1.ProviderNetwork, results map[string]result) error {
	for i := range pns {
		pn := &pns[i]
		if !pn.DeletionTimestamp.IsZero() {
			continue
		}
		prev := entryOf(pn, r.NodeName)
		res, in := results[pn.Name]
		if !in {
			if prev != nil {
				if err := r.apply(ctx, pn.Name, nil); err != nil {
					return err
				}
			}
			continue
		}
		next := nodeEntry(r.NodeName, res, prev, pn.Generation)
		if prev != nil && equality.Semantic.DeepEqual(*prev, next) && slices.Contains(pn.Status.ReadyNodes, r.NodeName) == (res.reason == "") {
			continue
		}
		if err := r.apply(ctx, pn.Name, &next); err != nil {
			return err
		}
		r.event(pn, prev, res)
	}
	return nil
}

// nodeEntry is the status entry for res, keeping the condition's transition time when its
// status stays.
func nodeEntry(node string, res result, prev *kovnv1.ProviderNetworkNodeStatus, generation int64) kovnv1.ProviderNetworkNodeStatus {
	e := kovnv1.ProviderNetworkNodeStatus{Node: node, Interface: res.want.NIC, Bridge: kovnv1.BridgeName(res.want.Provider)}
	if prev != nil {
		e.Conditions = slices.Clone(prev.Conditions)
	}
	c := metav1.Condition{Type: kovnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kovnv1.ReasonReconciled, ObservedGeneration: generation,
		Message: res.want.NIC + " is in " + e.Bridge + " with its addresses and routes; " + BridgeMappingsKey + " maps " + res.want.Provider}
	if res.reason != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, res.reason, res.msg
	}
	meta.SetStatusCondition(&e.Conditions, c)
	return e
}

func entryOf(pn *kovnv1.ProviderNetwork, node string) *kovnv1.ProviderNetworkNodeStatus {
	for i := range pn.Status.Nodes {
		if pn.Status.Nodes[i].Node == node {
			return &pn.Status.Nodes[i]
		}
	}
	return nil
}

// apply writes this node's entry and its name in readyNodes or notReadyNodes (nil: removes
// all three).
func (r *Reconciler) apply(ctx context.Context, provider string, entry *kovnv1.ProviderNetworkNodeStatus) error {
	nodes, ready, notReady := []any{}, []any{}, []any{}
	if entry != nil {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(entry)
		if err != nil {
			return err
		}
		nodes = append(nodes, m)
		if meta.IsStatusConditionTrue(entry.Conditions, kovnv1.ConditionReady) {
			ready = append(ready, r.NodeName)
		} else {
			notReady = append(notReady, r.NodeName)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kovnv1.GroupVersion.String(), "kind": "ProviderNetwork", "metadata": map[string]any{"name": provider},
		"status": map[string]any{"nodes": nodes, "readyNodes": ready, "notReadyNodes": notReady}}}
	err := r.Client.Status().Patch(ctx, u, client.Apply, client.FieldOwner("kovn-daemon-"+r.NodeName), client.ForceOwnership)
	return client.IgnoreNotFound(err)
}

// event reports a change of this node's readiness on the ProviderNetwork.
func (r *Reconciler) event(pn *kovnv1.ProviderNetwork, prev *kovnv1.ProviderNetworkNodeStatus, res result) {
	if r.Recorder == nil {
		return
	}
	wasReady := prev != nil && meta.IsStatusConditionTrue(prev.Conditions, kovnv1.ConditionReady)
	switch {
	case res.reason == "" && !wasReady:
		r.Recorder.Eventf(pn, corev1.EventTypeNormal, "NodeReady", "%s: %s moved into %s", r.NodeName, res.want.NIC, kovnv1.BridgeName(pn.Name))
	case res.reason != "":
		if c := prevCondition(prev); c == nil || c.Reason != res.reason || c.Message != res.msg {
			r.Recorder.Eventf(pn, corev1.EventTypeWarning, res.reason, "%s: %s", r.NodeName, res.msg)
		}
	}
}

func prevCondition(prev *kovnv1.ProviderNetworkNodeStatus) *metav1.Condition {
	if prev == nil {
		return nil
	}
	return meta.FindStatusCondition(prev.Conditions, kovnv1.ConditionReady)
}
