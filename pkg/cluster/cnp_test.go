package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/kovn/kovn/api/policy/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// cnpACLs returns the matches of policy name's ACLs in NB by rule key and family.
func (e *reconcilerEnv) cnpACLs(t *testing.T, name string) map[string]string {
	t.Helper()
	var acls []nb.ACL
	if err := e.nb.List(context.Background(), &acls); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range acls {
		if a.ExternalIDs[topology.ClusterPolicyKey] == name {
			out[a.ExternalIDs[topology.PolicyRuleKey]+"/"+a.ExternalIDs[topology.IPFamilyKey]] = a.Match
		}
	}
	return out
}

func (e *reconcilerEnv) cnpAddressSet(t *testing.T, name string) []string {
	t.Helper()
	var sets []nb.AddressSet
	if err := e.nb.List(context.Background(), &sets); err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if s.Name == name {
			return s.Addresses
		}
	}
	return nil
}

func cnpCondition(t *testing.T, c client.Client, name, typ string) *metav1.Condition {
	t.Helper()
	var p policyv1.ClusterNetworkPolicy
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(p.Status.Conditions, typ)
}

// A ClusterNetworkPolicy is programmed from the pods' IP objects and says so in its
// conditions; a spec gone bad (a selector that does not parse) is a condition while the last
// good ACLs stay and keep following pods, also after a restart of the controller; deleting
// the policy removes its rows.
func TestClusterNetworkPolicyReconciler(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1", Labels: map[string]string{"team": "a"}}}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	cnp := &policyv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-b", UID: "u1"}, Spec: policyv1.ClusterNetworkPolicySpec{
		Tier: policyv1.AdminTier, Priority: 3,
		Subject: policyv1.ClusterNetworkPolicySubject{Pods: &policyv1.NamespacedPod{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
		Ingress: []policyv1.ClusterNetworkPolicyIngressRule{{Action: policyv1.ClusterNetworkPolicyRuleActionDeny,
			From: []policyv1.ClusterNetworkPolicyIngressPeer{{Pods: &policyv1.NamespacedPod{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}}},
			Protocols: []policyv1.ClusterNetworkPolicyProtocol{{TCP: &policyv1.ClusterNetworkPolicyProtocolTCP{
				DestinationPort: &policyv1.Port{Range: &policyv1.PortRange{Start: 8000, End: 8080}}}}}}},
	}}
	e := defaultEnv(t, ns, pod("a"), pod("b"), cnp)
	for _, p := range []string{"a", "b"} {
		e.reconcile(t, e.pods, "ns1", p)
		e.reconcile(t, e.ports, "ns1", p)
	}
	r := &ClusterNetworkPolicyReconciler{Client: e.c, State: e.st, NB: e.nb, Recorder: e.rec}
	e.reconcile(t, r, "", "clusternetworkpolicies")
	acls := e.cnpACLs(t, "deny-b")
	if m := acls["ingress/0/ip4"]; !strings.Contains(m, "outport == @"+topology.ClusterPolicyPortGroup("deny-b", "")) ||
		!strings.HasSuffix(m, "(tcp.dst >= 8000 && tcp.dst <= 8080)") {
		t.Fatalf("ACLs %v", acls)
	}
	set := strings.Fields(acls["ingress/0/ip4"])[6][1:]
	var b kovnv1.IP
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: IPObjectName("ns1", "b")}, &b); err != nil {
		t.Fatal(err)
	}
	addrs, _ := b.Spec.Addrs()
	if got := e.cnpAddressSet(t, set); len(got) != 1 || len(addrs) == 0 || got[0] != addrs[0].String() {
		t.Fatalf("peer set %v, want pod b's %v", got, addrs)
	}
	for _, typ := range []string{kovnv1.ConditionValidated, kovnv1.ConditionReady, kovnv1.ConditionSupported} {
		if c := cnpCondition(t, e.c, "deny-b", typ); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v", typ, c)
		}
	}

	// Gone bad: an In expression without values.
	var cur policyv1.ClusterNetworkPolicy
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: "deny-b"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Ingress[0].From[0].Pods.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}
	cur.Spec.Ingress[0].Protocols = nil
	if err := e.c.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, r, "", "clusternetworkpolicies")
	if c := cnpCondition(t, e.c, "deny-b", kovnv1.ConditionValidated); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "last good spec") {
		t.Errorf("Validated %+v", c)
	}
	if got := e.cnpACLs(t, "deny-b"); got["ingress/0/ip4"] != acls["ingress/0/ip4"] {
		t.Errorf("ACLs changed to %v", got)
	}
	// The last good spec still follows pods: b deleted leaves the set.
	if err := e.c.Delete(context.Background(), pod("b")); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, r, "", "clusternetworkpolicies")
	if got := e.cnpAddressSet(t, set); len(got) != 0 {
		t.Errorf("peer set %v after pod b was deleted", got)
	}
	// A controller started after the spec went bad leaves the rows as they are.
	fresh := &ClusterNetworkPolicyReconciler{Client: e.c, State: e.st, NB: e.nb, Recorder: e.rec}
	e.reconcile(t, fresh, "", "clusternetworkpolicies")
	if c := cnpCondition(t, e.c, "deny-b", kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != kovnv1.ReasonValidationFailed {
		t.Errorf("Ready after restart %+v", c)
	}
	if got := e.cnpACLs(t, "deny-b"); got["ingress/0/ip4"] != acls["ingress/0/ip4"] {
		t.Errorf("ACLs after restart %v", got)
	}
	if err := e.c.Delete(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, r, "", "clusternetworkpolicies")
	if got := e.cnpACLs(t, "deny-b"); len(got) != 0 {
		t.Errorf("ACLs left after delete: %v", got)
	}
}

// A policy whose subject pod has no switch port yet waits for it (a requeue, Ready=False
// Reconciling), and is programmed once the port is there.
func TestClusterNetworkPolicyWaitsForPorts(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1", Labels: map[string]string{"team": "a"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "a"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	cnp := &policyv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: policyv1.ClusterNetworkPolicySpec{
		Tier: policyv1.BaselineTier, Subject: policyv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Ingress: []policyv1.ClusterNetworkPolicyIngressRule{{Action: policyv1.ClusterNetworkPolicyRuleActionDeny,
			From: []policyv1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}}
	e := defaultEnv(t, ns, pod, cnp)
	e.reconcile(t, e.pods, "ns1", "a") // its IP object, not yet its port
	r := &ClusterNetworkPolicyReconciler{Client: e.c, State: e.st, NB: e.nb, Recorder: e.rec}
	res, err := r.Reconcile(context.Background(), clusterPoliciesKey)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("reconcile: %+v, %v; want a requeue", res, err)
	}
	if c := cnpCondition(t, e.c, "p", kovnv1.ConditionReady); c == nil || c.Reason != kovnv1.ReasonReconciling {
		t.Errorf("Ready %+v", c)
	}
	e.reconcile(t, e.ports, "ns1", "a")
	e.reconcile(t, r, "", "clusternetworkpolicies")
	if c := cnpCondition(t, e.c, "p", kovnv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready after the port: %+v", c)
	}
}
