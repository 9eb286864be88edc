package kovnctl

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/metricsauth"
)

// PingerApp labels kovn-pinger's pods (the chart's DaemonSet).
const PingerApp = "kovn-pinger"

// PathStatus is a path kovn-pinger found lossy: its last round lost every probe, or two rounds
// in a row lost one.
type PathStatus struct {
	Source string  `json:"source"` // the node the pinger runs on
	Kind   string  `json:"kind"`   // node, pod, service, dns, external, remote-pod
	Target string  `json:"target"`
	Family string  `json:"family,omitempty"`
	Lost   float64 `json:"lost"` // probes lost since the pinger started
	Sent   float64 `json:"sent"`
}

// ScrapeTimeout bounds the scrape of one pinger.
const ScrapeTimeout = 5 * time.Second

// PingerScrape is what ScrapePaths read: the lossy paths, and the ready pingers that did not
// answer kubectl-kovn (pods/exec), by node.
type PingerScrape struct {
	Lossy    []PathStatus
	Answered int
	Silent   []string
}

// ScrapePaths reads every ready kovn-pinger's metrics (pods/exec of its --get-metrics: the
// metrics port takes only tokens allowed to get /metrics, and pods/proxy passes none on), all
// at once, each within ScrapeTimeout. No pinger: an empty scrape.
func ScrapePaths(ctx context.Context, e *Execer) (PingerScrape, error) {
	var out PingerScrape
	var err error
	out.Answered, out.Silent, err = scrapePods(ctx, e, PingerApp, true, []string{"/kovn-pinger", "--" + metricsauth.GetMetricsFlag},
		func(_ string, raw []byte) error {
			paths, err := lossyPaths(raw)
			if err == nil {
				out.Lossy = append(out.Lossy, paths...)
			}
			return err
		})
	sort.Slice(out.Lossy, func(i, j int) bool { return pathKey(out.Lossy[i]) < pathKey(out.Lossy[j]) })
	return out, err
}

// scrapePods reads the metrics of every running pod labelled app, not being deleted, (only the
// ready ones with ready) by running argv in its first container (pods/exec), all at once, each
// within ScrapeTimeout, and hands each answer to read, one at a time. It returns how many
// answered and the nodes of those that did not (or whose answer read refused), sorted.
func scrapePods(ctx context.Context, e *Execer, app string, ready bool, argv []string, read func(node string, raw []byte) error) (int, []string, error) {
	pods, err := e.Kube.CoreV1().Pods(KovnNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return 0, nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	answered, silent := 0, []string{}
	for _, p := range pods.Items {
		container := containerRunning(&p, argv[0])
		// A pod being deleted is expected to stop answering.
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || container == "" || (ready && !podReady(&p)) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
			defer cancel()
			raw, err := e.Output(ctx, p.Name, container, argv...)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				err = read(p.Spec.NodeName, []byte(raw))
			}
			if err != nil {
				silent = append(silent, p.Spec.NodeName)
				return
			}
			answered++
		}()
	}
	wg.Wait()
	sort.Strings(silent)
	return answered, silent, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pathKey(p PathStatus) string { return p.Source + "|" + p.Kind + "|" + p.Target + "|" + p.Family }

// containerRunning is the container of p whose command is binary (kovn's image holds one
// binary per component), or "".
func containerRunning(p *corev1.Pod, binary string) string {
	for _, c := range p.Spec.Containers {
		if len(c.Command) > 0 && c.Command[0] == binary {
			return c.Name
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
