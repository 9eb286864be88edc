package deploy

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// promqlWords are the PromQL functions, aggregations and keywords the dashboard may use; any
// other bare identifier in an expression is a metric name.
var promqlWords = []string{"sum", "min", "max", "avg", "count", "rate", "irate", "increase", "histogram_quantile",
	"by", "without", "ignoring", "on", "group_left", "group_right", "and", "or", "unless", "time"}

// TestDashboardReadsOnlyKovnSeries: every query parses into names kovn's components serve
// (DashboardSources, which the e2e tests check against live scrapes), and each panel has one.
func TestDashboardReadsOnlyKovnSeries(t *testing.T) {
	queries, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 10 {
		t.Fatalf("%d panels with queries", len(queries))
	}
	inBraces := regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|"[^"]*"|\b(by|without|ignoring|on)\s*\([^)]*\)`)
	ident := regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	var all []string
	for title, exprs := range queries {
		for _, e := range exprs {
			names := MetricNames(e)
			if len(names) == 0 {
				t.Errorf("panel %q: %q reads no kovn series", title, e)
			}
			for _, w := range ident.FindAllString(inBraces.ReplaceAllString(e, " "), -1) {
				if !slices.Contains(promqlWords, w) && !slices.Contains(names, w) {
					t.Errorf("panel %q: %q reads %s, which no kovn component serves", title, e, w)
				}
			}
			all = append(all, names...)
		}
	}
	for _, n := range all {
		served := false
		for _, prefixes := range DashboardSources {
			served = served || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(n, p) })
		}
		if !served {
			t.Errorf("%s: no component in DashboardSources serves it, so no e2e test checks it", n)
		}
	}
	for _, c := range []string{"kovn-controller", "kovn-daemon", "kovn-speaker", "kovn-ovn-monitor", "kovn-pinger"} {
		if names, _ := DashboardNames(c); len(names) == 0 {
			t.Errorf("the dashboard reads nothing of %s", c)
		}
	}
}

func TestChartShipsTheDashboard(t *testing.T) {
	cm := find(t, mustRender(t, sampleValues...), "ConfigMap", "kovn-grafana-dashboard")
	if cm == nil {
		t.Fatal("no ConfigMap kovn-grafana-dashboard")
	}
	var got corev1.ConfigMap
	strict(t, cm, &got)
	want, _ := Chart.ReadFile(DashboardFile)
	if got.Data["kovn.json"] != string(want) || got.Labels["grafana_dashboard"] != "1" || got.Namespace != "kube-system" {
		t.Errorf("dashboard ConfigMap: labels %v, namespace %s, data equal %t", got.Labels, got.Namespace, got.Data["kovn.json"] == string(want))
	}
	if !json.Valid([]byte(got.Data["kovn.json"])) {
		t.Error("dashboard is not JSON")
	}
	if find(t, mustRender(t, append(slices.Clone(sampleValues), "grafanaDashboard.enabled=false")...), "ConfigMap", "kovn-grafana-dashboard") != nil {
		t.Error("grafanaDashboard.enabled=false still ships it")
	}
}
