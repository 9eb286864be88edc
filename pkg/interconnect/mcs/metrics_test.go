package mcs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestMCSMetrics(t *testing.T) {
	cond := func(typ mcsv1.ServiceExportConditionType, ok bool) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: string(typ), Status: s}
	}
	export := func(name string, conds ...metav1.Condition) *mcsv1.ServiceExport {
		return &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Status: mcsv1.ServiceExportStatus{Conditions: conds}}
	}
	valid, ready := cond(mcsv1.ServiceExportConditionValid, true), cond(mcsv1.ServiceExportConditionReady, true)
	objs := []runtime.Object{
		export("ok", valid, ready, cond(mcsv1.ServiceExportConditionConflict, false)),
		export("ok2", valid, ready),
		export("clash", valid, ready, cond(mcsv1.ServiceExportConditionConflict, true)),
		export("noservice", cond(mcsv1.ServiceExportConditionValid, false), cond(mcsv1.ServiceExportConditionReady, false)),
		export("new"),
		&mcsv1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ok"},
			Spec:   mcsv1.ServiceImportSpec{Type: mcsv1.ClusterSetIP},
			Status: mcsv1.ServiceImportStatus{Clusters: []mcsv1.ClusterStatus{{Cluster: "c1"}, {Cluster: "c2"}}}},
		&mcsv1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
			Spec: mcsv1.ServiceImportSpec{Type: mcsv1.Headless}},
	}
	scheme := runtime.NewScheme()
	if err := mcsv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).Build()
	want := `
# HELP kovn_mcs_service_exports ServiceExports in this cluster by state: exported (Ready), conflict (Conflict True), invalid (Valid False), pending.
# TYPE kovn_mcs_service_exports gauge
kovn_mcs_service_exports{state="conflict"} 1
kovn_mcs_service_exports{state="exported"} 2
kovn_mcs_service_exports{state="invalid"} 1
kovn_mcs_service_exports{state="pending"} 1
# HELP kovn_mcs_service_imports ServiceImports in this cluster by type (ClusterSetIP, Headless).
# TYPE kovn_mcs_service_imports gauge
kovn_mcs_service_imports{type="ClusterSetIP"} 1
kovn_mcs_service_imports{type="Headless"} 1
# HELP kovn_mcs_service_import_clusters Clusters serving a ServiceImport (status.clusters).
# TYPE kovn_mcs_service_import_clusters gauge
kovn_mcs_service_import_clusters{name="db",namespace="ns"} 0
kovn_mcs_service_import_clusters{name="ok",namespace="ns"} 2
`
	if err := testutil.CollectAndCompare(metricsCollector{c}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
