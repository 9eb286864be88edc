// Package report turns benchmark samples into the figures `make bench` prints and plots:
// latency percentiles, per-band summaries, a process's CPU time and peak memory, and a PNG of
// latency against pod count. Pure helpers, unit-tested without a rig.
package report

import (
	"fmt"
	"sort"
	"time"
)

// Summary is a latency distribution.
type Summary struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// Summarize computes nearest-rank percentiles of ds (ds is not modified).
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(f float64) time.Duration {
		i := int(f*float64(len(s))+0.999999) - 1 // nearest rank: ceil(f*N)-1
		return s[max(0, min(i, len(s)-1))]
	}
	return Summary{N: len(s), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: s[len(s)-1]}
}

func (s Summary) String() string {
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("n %d  p50 %s  p90 %s  p99 %s  max %s", s.N, r(s.P50), r(s.P90), r(s.P99), r(s.Max))
}

// Band summarises the samples of pods From..To-1 (by creation order = pod count at creation).
type Band struct {
	From, To int
	Summary
}

// Bands splits samples indexed by creation order into bands of width pods. A negative sample
// means "never seen" and is left out of the band (Missing counts it).
func Bands(lat []time.Duration, width int) []Band {
	var out []Band
	for from := 0; from < len(lat); from += width {
		to := min(from+width, len(lat))
		var ds []time.Duration
		for _, d := range lat[from:to] {
			if d >= 0 {
				ds = append(ds, d)
			}
		}
		out = append(out, Band{From: from, To: to, Summary: Summarize(ds)})
	}
	return out
}

// Missing counts samples never observed (negative).
func Missing(lat []time.Duration) int {
	n := 0
	for _, d := range lat {
		if d < 0 {
			n++
		}
	}
	return n
}

// Ms renders a duration in milliseconds for tables.
func Ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
