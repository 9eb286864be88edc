//go:build bench

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kovn/kovn/test/bench/report"
	"github.com/kovn/kovn/test/rig"
)

// TestTLSCost: what mutual TLS on kovn-controller's NB connection costs. The same two
// scenarios as TestScale (pods created at a steady rate: create -> LSP in NB; a cold start of
// the controller with every pod waiting), once on a rig whose NB serves plain TCP and once on
// one whose NB takes mutual TLS only, kovn-controller reaching NB over the network both times
// (rig.Config.ControllerNBOverNetwork, as the chart's does). No perf profile, no apiserver
// baseline: both rigs run the same way. Sizes from TestScale's knobs (KOVN_BENCH_PODS, ...).
func TestTLSCost(t *testing.T) {
	type result struct {
		p50, p99, cold time.Duration
	}
	modes := []struct {
		name  string
		plain bool
	}{{"plain TCP", true}, {"mutual TLS", false}}
	results := make([]result, len(modes))
	for i, m := range modes {
		sp := scaleFromEnv()
		sp.profile, sp.baseline = false, false
		sp.base = rig.Config{ControllerNBOverNetwork: true, InsecurePlainTCP: m.plain}
		t.Run(m.name, func(t *testing.T) {
			lat, _ := scaleLatency(t, sp)
			s := report.Summarize(lat)
			results[i].p50, results[i].p99 = s.P50, s.P99
			results[i].cold, _ = coldStart(t, sp)
		})
	}
	sp := scaleFromEnv()
	text := fmt.Sprintf("== kovn-controller -> NB over plain TCP and over mutual TLS, %d pods on %d fake nodes (%d pods/s)\n", sp.pods, sp.fakes, sp.rate)
	text += fmt.Sprintf("%-11s %12s %12s %14s\n", "NB", "create p50", "create p99", "cold start")
	for i, m := range modes {
		text += fmt.Sprintf("%-11s %10s ms %10s ms %12.1f s\n", m.name, report.Ms(results[i].p50), report.Ms(results[i].p99), results[i].cold.Seconds())
	}
	ratio := func(f func(result) time.Duration) float64 {
		if f(results[0]) <= 0 {
			return 0
		}
		return float64(f(results[1])) / float64(f(results[0]))
	}
	text += fmt.Sprintf("TLS / plain: create p99 %.2f, cold start %.2f (goal <= 1.1)\n",
		ratio(func(r result) time.Duration { return r.p99 }), ratio(func(r result) time.Duration { return r.cold }))
	fmt.Print("\n" + text)
	if err := os.WriteFile(filepath.Join(outDir(t), "tlscost.txt"), []byte(text), 0o644); err != nil {
		t.Error(err)
	}
}
