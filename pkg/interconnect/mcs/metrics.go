package mcs

import (
	"context"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var (
	exportsDesc = prometheus.NewDesc("kovn_mcs_service_exports",
		"ServiceExports in this cluster by state: exported (Ready), conflict (Conflict True), invalid (Valid False), pending.",
		[]string{"state"}, nil)
	importsDesc = prometheus.NewDesc("kovn_mcs_service_imports",
		"ServiceImports in this cluster by type (ClusterSetIP, Headless).", []string{"type"}, nil)
	importClustersDesc = prometheus.NewDesc("kovn_mcs_service_import_clusters",
		"Clusters serving a ServiceImport (status.clusters).", []string{"namespace", "name"}, nil)
)

// metricsCollector counts the exports and imports at each scrape from the manager's cache, so
// the figures are what the API holds now (level, not a sum of events).
type metricsCollector struct{ r client.Reader }

// RegisterMetrics adds the MCS series, read through r (the manager's cached client), to reg.
func RegisterMetrics(reg prometheus.Registerer, r client.Reader) error {
	return reg.Register(metricsCollector{r})
}

func (metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- exportsDesc
	ch <- importsDesc
	ch <- importClustersDesc
}

func (m metricsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var exports mcsv1.ServiceExportList
	if err := m.r.List(ctx, &exports); err == nil {
		counts := map[string]int{}
		for _, state := range kovnv1.ExportStates {
			counts[state] = 0
		}
		for i := range exports.Items {
			counts[kovnv1.ExportState(exports.Items[i].Status.Conditions)]++
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(exportsDesc, prometheus.GaugeValue, float64(n), state)
		}
	}
	var imports mcsv1.ServiceImportList
	if err := m.r.List(ctx, &imports); err == nil {
		counts := map[string]int{string(mcsv1.ClusterSetIP): 0, string(mcsv1.Headless): 0}
		for i := range imports.Items {
			im := &imports.Items[i]
			counts[string(im.Spec.Type)]++
			ch <- prometheus.MustNewConstMetric(importClustersDesc, prometheus.GaugeValue, float64(len(im.Status.Clusters)),
				im.Namespace, im.Name)
		}
		for t, n := range counts {
			ch <- prometheus.MustNewConstMetric(importsDesc, prometheus.GaugeValue, float64(n), t)
		}
	}
}
