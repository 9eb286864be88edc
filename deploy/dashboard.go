package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DashboardFile is the Grafana dashboard in the chart.
const DashboardFile = "dashboards/kovn.json"

// DashboardSources say which component serves each metric family the dashboard reads: the
// e2e tests check every dashboard name of a component against a live scrape of it, and the
// unit test that every dashboard name belongs to one of them, so together they cover the
// whole dashboard.
var DashboardSources = map[string][]string{
	"kovn-controller": {"kovn_ovsdb_", "kovn_ic_", "kovn_mcs_", "kovn_nb_", "kovn_subnet_",
		"controller_runtime_", "leader_election_", "workqueue_"},
	"kovn-daemon":      {"kovn_node_", "kovn_cni_", "kovn_pod_network_"},
	"kovn-speaker":     {"kovn_bgp_"},
	"kovn-ovn-monitor": {"kovn_ovn_"},
	"kovn-pinger":      {"kovn_pinger_"},
}

// DashboardNames are the metric names the dashboard reads that component serves.
func DashboardNames(component string) ([]string, error) {
	queries, err := DashboardQueries()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, exprs := range queries {
		for _, e := range exprs {
			for _, n := range MetricNames(e) {
				if slices.ContainsFunc(DashboardSources[component], func(p string) bool { return strings.HasPrefix(n, p) }) {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

var metricName = regexp.MustCompile(`\b(?:kovn|controller_runtime|leader_election|workqueue)_[a-z0-9_]+`)

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// DashboardQueries are the dashboard's PromQL expressions by panel title.
func DashboardQueries() (map[string][]string, error) {
	b, err := Chart.ReadFile(DashboardFile)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out[p.Title] = append(out[p.Title], t.Expr)
		}
	}
	return out, nil
}

// MetricNames are the metric names an expression reads (a histogram's _bucket/_sum/_count
// series as written).
func MetricNames(expr string) []string {
	names := metricName.FindAllString(expr, -1)
	slices.Sort(names)
	return slices.Compact(names)
}
