package rig

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The rig applies deploy/'s identities, RBAC and policy, never its workloads (the rig runs
// those as processes; helm from `make helm`), and knows every kind it finds there.
func TestAccessObjects(t *testing.T) {
	helm, err := filepath.Abs("../../_output/bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := AccessObjects(helm)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range objs {
		got = append(got, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName())
	}
	sort.Strings(got)
	want := []string{
		"ClusterRole//kovn-controller", "ClusterRole//kovn-daemon", "ClusterRole//kovn-metrics-reader", "ClusterRole//kovn-speaker",
		"ClusterRoleBinding//kovn-controller", "ClusterRoleBinding//kovn-daemon", "ClusterRoleBinding//kovn-speaker",
		"Namespace//kovn-bgp", "Role/kovn-bgp/kovn-speaker", "Role/kube-system/kovn-controller", "Role/kube-system/kovn-daemon",
		"RoleBinding/kovn-bgp/kovn-speaker", "RoleBinding/kube-system/kovn-controller", "RoleBinding/kube-system/kovn-daemon",
		"ServiceAccount/kube-system/kovn-controller", "ServiceAccount/kube-system/kovn-daemon", "ServiceAccount/kube-system/kovn-speaker",
		"ValidatingAdmissionPolicy//kovn-daemon-network-status", "ValidatingAdmissionPolicy//kovn-daemon-own-node", "ValidatingAdmissionPolicy//kovn-daemon-own-provider-entry",
		"ValidatingAdmissionPolicyBinding//kovn-daemon-network-status", "ValidatingAdmissionPolicyBinding//kovn-daemon-own-node", "ValidatingAdmissionPolicyBinding//kovn-daemon-own-provider-entry",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("access objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
