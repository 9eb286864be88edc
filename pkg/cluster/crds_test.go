package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// RequireCRDs waits for deploy/crds as installed by the chart, and names what is missing: a CRD
// not installed, not established, or an older one without a version this build uses.
func TestRequireCRDs(t *testing.T) {
	want, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 14 {
		t.Fatalf("%d CRDs in deploy/crds", len(want))
	}
	scheme := runtime.NewScheme()
	if err := apiextv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	installed := func(skip string, edit func(*apiextv1.CustomResourceDefinition)) client.Client {
		var objs []client.Object
		for _, crd := range want {
			if crd.Name == skip {
				continue
			}
			c := crd.DeepCopy()
			c.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
			if edit != nil {
				edit(c)
			}
			objs = append(objs, c)
		}
		return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	}
	check := func(name string, c client.Client, says string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		err := RequireCRDs(ctx, c)
		if says == "" && err != nil || says != "" && (err == nil || !strings.Contains(err.Error(), says)) {
			t.Errorf("%s: %v, want %q", name, err, says)
		}
	}
	check("all installed", installed("", nil), "")
	check("one missing", installed("subnets.kovn.io", nil), "CRD subnets.kovn.io is not installed")
	check("mcs-api's missing", installed("serviceimports.multicluster.x-k8s.io", nil), "serviceimports.multicluster.x-k8s.io is not installed")
	check("not established", installed("", func(c *apiextv1.CustomResourceDefinition) {
		if c.Name == "ips.kovn.io" {
			c.Status.Conditions = nil
		}
	}), "CRD ips.kovn.io is not established")
	check("an older version", installed("", func(c *apiextv1.CustomResourceDefinition) {
		if c.Name == "vpcs.kovn.io" {
			c.Spec.Versions[0].Name = "v1alpha0"
		}
	}), "CRD vpcs.kovn.io does not serve version v1alpha1")
}
