package rig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kovn/kovn/deploy"
)

// accessKinds are the kinds of deploy/ objects the rig applies, with their resource names.
// Workloads are not applied: the rig runs kovn-controller and kovn-daemon as processes itself.
var accessKinds = map[schema.GroupVersionKind]string{
	{Version: "v1", Kind: "ServiceAccount"}:                                                          "serviceaccounts",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:                         "clusterroles",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:                  "clusterrolebindings",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                                "roles",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:                         "rolebindings",
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}:        "validatingadmissionpolicies",
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}: "validatingadmissionpolicybindings",
}

var workloadKinds = map[string]bool{"Deployment": true, "DaemonSet": true}

// AccessObjects returns the identity, RBAC and policy objects of deploy/ in apply order. An
// object of a kind the rig does not know is an error, so nothing added to deploy/ is skipped
// silently.
func AccessObjects() ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, f := range deploy.AccessFiles {
		b, err := deploy.FS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("deploy/%s: %w", f, err)
			}
			if len(u.Object) == 0 || workloadKinds[u.GetKind()] {
				continue
			}
			if _, ok := accessKinds[u.GroupVersionKind()]; !ok {
				return nil, fmt.Errorf("deploy/%s: %s %s is of a kind the rig does not apply", f, u.GetKind(), u.GetName())
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// applyAccess server-side applies deploy/'s access objects (idempotent: a rerun is a no-op).
func applyAccess(ctx context.Context, dyn dynamic.Interface) error {
	objs, err := AccessObjects()
	if err != nil {
		return err
	}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		res := dyn.Resource(gvk.GroupVersion().WithResource(accessKinds[gvk]))
		var ri dynamic.ResourceInterface = res
		if u.GetNamespace() != "" {
			ri = res.Namespace(u.GetNamespace())
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "kovn-rig", Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
	return nil
}
