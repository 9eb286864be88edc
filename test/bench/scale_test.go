//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

// scaleParams are the knobs of the scale scenarios (env overrides for quicker runs).
type scaleParams struct {
	pods, fakes, rate, band int
	// base is the rig the scenarios bring up (Nodes and FakeNodes set from the above).
	base rig.Config
	// profile records kovn-controller with perf; baseline times the apiserver alone after a
	// cold start. Comparisons of two rigs turn both off.
	profile, baseline bool
}

func scaleFromEnv() scaleParams {
	return scaleParams{pods: envInt("KOVN_BENCH_PODS", 10000), fakes: envInt("KOVN_BENCH_FAKE_NODES", 200),
		rate: envInt("KOVN_BENCH_RATE", 20), band: envInt("KOVN_BENCH_BAND", 1000), profile: true, baseline: true}
}

// rigConfig is the scenarios' rig: one real node and the fake ones.
func (sp scaleParams) rigConfig() rig.Config {
	cfg := sp.base
	cfg.Nodes, cfg.FakeNodes = 1, sp.fakes
	return cfg
}

// TestScale: goal 3 of issue 13, measured black-box through the API and NB on fake nodes.
//   - latency: pods created at a steady rate up to N; per pod, create call -> its
//     Logical_Switch_Port in NB; percentiles per band of 1,000 pods.
//   - coldstart: N pods exist unallocated while kovn-controller is stopped; time from its start
//     until every pod has its port, against the apiserver alone accepting the same writes.
//
// Each scenario gets a fresh rig; the plot of the first carries the second's figures.
func TestScale(t *testing.T) {
	sp := scaleFromEnv()
	var lat []time.Duration
	var notes []string
	t.Run("latency", func(t *testing.T) { lat, notes = scaleLatency(t, sp) })
	t.Run("coldstart", func(t *testing.T) {
		_, n := coldStart(t, sp)
		notes = append(notes, n...)
	})
	if len(lat) == 0 {
		return
	}
	png := filepath.Join(outDir(t), "scale-latency.png")
	p := report.Plot{Title: fmt.Sprintf("kovn: pod create -> LSP in NB, %d pods on %d fake nodes (%d pods/s)", sp.pods, sp.fakes, sp.rate),
		Lat: lat, Bands: report.Bands(lat, sp.band), Goal: 100 * time.Millisecond, Notes: notes}
	if err := p.WritePNG(png); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("plot: %s\n", png)
}

// scaleLatency runs the ramp and returns the per-pod latencies (index = pods that existed).
func scaleLatency(t *testing.T, sp scaleParams) ([]time.Duration, []string) {
	r := upRig(t, sp.rigConfig())
	kc := kubernetes.NewForConfigOrDie(restConfig(t, r))
	w := watchLSPs(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	waitJoinPorts(t, ctx, w, sp.fakes)
	pid, err := r.State.DaemonPid("c1", "kovn-controller")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := report.ReadProc(pid)
	createNamespace(t, kc, "scale")
	created := make([]time.Time, sp.pods)
	out := outDir(t)
	stopPerf := func() {}
	pc := pacer{kc: kc, ns: "scale", n: sp.pods, rate: sp.rate, workers: 8, fakes: sp.fakes, before: func(i int) {
		created[i] = time.Now()
		// Profile 60 s from 70 % of the ramp, where per-event cost shows; the bands before and
		// after the window show whether perf itself changed the figures.
		if sp.profile && i == sp.pods*7/10 {
			stop := perfRecord(t, pid, filepath.Join(out, "kovn-controller-ramp.perf.data"), filepath.Join(out, "kovn-controller-ramp-profile.txt"))
			var once sync.Once
			stopPerf = func() { once.Do(stop) }
			time.AfterFunc(time.Minute, stopPerf)
		}
	}}
	start := time.Now()
	if err := pc.run(ctx); err != nil {
		t.Fatal(err)
	}
	createdIn := time.Since(start)
	names := make([]string, sp.pods)
	for i := range names {
		names[i] = podName(i) + ".scale"
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	missing := w.waitAll(wctx, names)
	wcancel()
	stopPerf()
	after, _ := report.ReadProc(pid)
	lat := make([]time.Duration, sp.pods)
	for i, n := range names {
		lat[i] = -1
		if at, ok := w.at(n); ok {
			lat[i] = at.Sub(created[i])
		}
	}
	printLatency(sp, lat, createdIn, missing)
	writeCSV(t, filepath.Join(out, "scale-latency.csv"), lat)
	usage := report.Usage(before, after)
	fmt.Printf("kovn-controller over the ramp: %s\n", usage)
	all := report.Summarize(lat)
	return lat, []string{fmt.Sprintf("ramp: all pods p50 %s p99 %s; kovn-controller %s", report.Ms(all.P50)+"ms", report.Ms(all.P99)+"ms", usage)}
}

func printLatency(sp scaleParams, lat []time.Duration, createdIn time.Duration, missing int) {
	fmt.Printf("\n== pod create -> LSP in NB, %d pods on %d fake nodes, created at %d/s (took %s), %d never appeared\n",
		sp.pods, sp.fakes, sp.rate, createdIn.Round(time.Second), missing)
	fmt.Printf("%-13s %6s %8s %8s %8s %8s\n", "pods", "n", "p50 ms", "p90 ms", "p99 ms", "max ms")
	for _, b := range report.Bands(lat, sp.band) {
		fmt.Printf("%5d-%-7d %6d %8s %8s %8s %8s\n", b.From, b.To, b.N, report.Ms(b.P50), report.Ms(b.P90), report.Ms(b.P99), report.Ms(b.Max))
	}
	s := report.Summarize(lat)
	fmt.Printf("%-13s %6d %8s %8s %8s %8s\n", "all", s.N, report.Ms(s.P50), report.Ms(s.P90), report.Ms(s.P99), report.Ms(s.Max))
}

// writeCSV keeps the raw samples (pods existing, latency in ms; -1 = never seen) for re-plotting.
func writeCSV(t *testing.T, path string, lat []time.Duration) {
	var b strings.Builder
	b.WriteString("pods,latency_ms\n")
	for i, d := range lat {
		ms := -1.0
		if d >= 0 {
			ms = float64(d) / float64(time.Millisecond)
		}
		fmt.Fprintf(&b, "%d,%.1f\n", i, ms)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
	fmt.Printf("samples: %s\n", path)
}

// waitJoinPorts waits until kovn gave every fake node its join port, so the ramp starts on
// a settled controller.
func waitJoinPorts(t *testing.T, ctx context.Context, w *lspWatch, fakes int) {
	t.Helper()
	var names []string
	for i := 1; i <= fakes; i++ {
		names = append(names, "node-"+rig.FakeNodeName(1, i))
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if missing := w.waitAll(wctx, names); missing > 0 {
		t.Fatalf("%d of %d fake nodes have no join port in NB", missing, fakes)
	}
}
