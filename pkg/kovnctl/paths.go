package kovnctl

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PingerApp labels kovn-pinger's pods (the chart's DaemonSet).
const PingerApp = "kovn-pinger"

// PathStatus is a path kovn-pinger found lossy: two rounds in a row lost a probe of it.
type PathStatus struct {
	Source string  `json:"source"` // the node the pinger runs on
	Kind   string  `json:"kind"`   // node, pod, service, dns, external, remote-pod
	Target string  `json:"target"`
	Family string  `json:"family,omitempty"`
	Lost   float64 `json:"lost"` // probes lost since the pinger started
	Sent   float64 `json:"sent"`
}

// ScrapePaths reads every running kovn-pinger's metrics through the API server (pods/proxy)
// and returns the lossy paths and how many pingers answered. No pinger: none and 0.
func ScrapePaths(ctx context.Context, kc kubernetes.Interface) ([]PathStatus, int, error) {
	pods, err := kc.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + PingerApp})
	if err != nil {
		return nil, 0, err
	}
	var out []PathStatus
	answered := 0
	for _, p := range pods.Items {
		port := metricsPort(&p)
		if p.Status.Phase != corev1.PodRunning || port == "" {
			continue
		}
		raw, err := kc.CoreV1().Pods(KovnNamespace).ProxyGet("http", p.Name, port, "metrics", nil).DoRaw(ctx)
		if err != nil {
			continue // a pinger that does not answer is no path verdict
		}
		answered++
		paths, err := lossyPaths(raw)
		if err != nil {
			return nil, answered, fmt.Errorf("%s's metrics: %w", p.Name, err)
		}
		out = append(out, paths...)
	}
	sort.Slice(out, func(i, j int) bool { return pathKey(out[i]) < pathKey(out[j]) })
	return out, answered, nil
}

func pathKey(p PathStatus) string { return p.Source + "|" + p.Kind + "|" + p.Target + "|" + p.Family }

func metricsPort(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "metrics" {
				return strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	return ""
}

// lossyPaths reads a pinger's metrics text: the paths whose kovn_pinger_path_lossy is 1, with
// their loss counters.
func lossyPaths(raw []byte) ([]PathStatus, error) {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	counter := func(name string, labels map[string]string) float64 {
		f := families[name]
		if f == nil {
			return 0
		}
		for _, m := range f.GetMetric() {
			if sameLabels(m.GetLabel(), labels) {
				return m.GetCounter().GetValue()
			}
		}
		return 0
	}
	var out []PathStatus
	if f := families["kovn_pinger_path_lossy"]; f != nil {
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				continue
			}
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, PathStatus{Source: l["source"], Kind: l["kind"], Target: l["target"], Family: l["family"],
				Lost: counter("kovn_pinger_lost_total", l), Sent: counter("kovn_pinger_probes_total", l)})
		}
	}
	return out, nil
}

func sameLabels[L interface {
	GetName() string
	GetValue() string
}](have []L, want map[string]string) bool {
	if len(have) != len(want) {
		return false
	}
	for _, lp := range have {
		if want[lp.GetName()] != lp.GetValue() {
			return false
		}
	}
	return true
}
