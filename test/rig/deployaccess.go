package rig

import (
	"context"
	"fmt"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kovn/kovn/deploy"
	"github.com/kovn/kovn/pkg/cluster"
)

// accessKinds are the kinds of deploy/ objects the rig applies, with their resource names.
// Workloads are not applied: the rig runs kovn-controller and kovn-daemon as processes itself.
var accessKinds = map[schema.GroupVersionKind]string{
	{Version: "v1", Kind: "Namespace"}:                                                               "namespaces",
	{Version: "v1", Kind: "ServiceAccount"}:                                                          "serviceaccounts",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:                         "clusterroles",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:                  "clusterrolebindings",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                                "roles",
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:                         "rolebindings",
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}:        "validatingadmissionpolicies",
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}: "validatingadmissionpolicybindings",
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}:                 "customresourcedefinitions",
}

// workloadKinds are rendered by the chart but run by the rig itself (as processes).
var workloadKinds = map[string]bool{"Deployment": true, "DaemonSet": true, "ConfigMap": true, "InterConnect": true}

// accessValues render every identity the chart has (the speaker's only exists with BGP on).
// kovn-pinger runs only on the chart install (a pod on kovn's network), not among the rig's processes.
var accessValues = []string{"ovnCentral.addresses={127.0.0.1}", "speaker.enabled=true", "pinger.enabled=false"}

// AccessObjects returns the identity, RBAC and policy objects of kovn's chart (rendered by
// helm, the binary's path) in apply order. An object of a kind the rig does not know is an
// error, so nothing added to the chart is skipped silently.
func AccessObjects(helm string) ([]*unstructured.Unstructured, error) {
	all, err := deploy.Render(helm, nil, accessValues...)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, u := range all {
		// Hooks (helm uninstall's cleanup) exist only while helm runs them.
		if _, hook := u.GetAnnotations()["helm.sh/hook"]; hook || workloadKinds[u.GetKind()] {
			continue
		}
		if _, ok := accessKinds[u.GroupVersionKind()]; !ok {
			return nil, fmt.Errorf("kovn's chart: %s %s is of a kind the rig does not apply", u.GetKind(), u.GetName())
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// crdObjects are deploy/crds' manifests (cluster.CRDs), which the chart installs (helm's
// crds/) and kovn-controller only waits for.
func crdObjects() ([]*unstructured.Unstructured, error) {
	typed, err := cluster.CRDs()
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(typed))
	for _, crd := range typed {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		delete(m, "status") // the apiserver's to write
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// applyAccess server-side applies deploy/'s CRDs and access objects, as the chart would
// (idempotent: a rerun is a no-op).
func applyAccess(ctx context.Context, dyn dynamic.Interface, helm string) error {
	objs, err := crdObjects()
	if err != nil {
		return err
	}
	access, err := AccessObjects(helm)
	if err != nil {
		return err
	}
	for _, u := range append(objs, access...) {
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

// helmBin is the helm `make helm` builds next to kovn's binaries.
func (c Config) helmBin() string { return filepath.Join(c.KovnBinDir, "helm") }
