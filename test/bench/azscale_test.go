//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/kovn/kovn/test/bench/report"
)

// TestClustersetScale: simulated availability zones, each the OVN central of a cluster with
// no node (its own NB and SB ovsdb-server, ovn-northd and ovn-ic), joined through one IC-NB
// and one IC-SB ovsdb-server. Every AZ has a router on transit switch ts1 and one subnet
// (10.x.y.0/24) that ovn-ic advertises; every AZ learns every other's. The set grows through
// the sizes in KOVN_BENCH_AZS (default 5,10,25,50,100,150,200) while memory allows, and at
// each size it prints:
//   - join: the added AZs started -> every AZ has learned every other AZ's subnet;
//   - a new subnet in az1 -> its route learned in every other AZ's NB (a libovsdb monitor of
//     Logical_Router_Static_Route per AZ timestamps it), KOVN_BENCH_ROUTES (5) times: the
//     last AZ's time (median and max over the routes) and the median AZ's;
//   - the CPU all processes spend per such route, and memory: the peak resident set of one
//     AZ's four processes (median AZ) and of the IC-SB server.
//
// Figures go to _output/bench/azscale.csv, azscale-route.png and azscale-memory.png.
// Processes talk over unix sockets only (no address or port on the host); the bench starts
// each and stops it by its pid.
func TestClustersetScale(t *testing.T) {
	sizes := azSizes(t)
	routes := envInt("KOVN_BENCH_ROUTES", 5)
	set := newSimSet(t)
	var rows []azScaleRow
	fmt.Printf("\n== clusterset scale: simulated AZs (NB + SB + ovn-northd + ovn-ic each), %d new routes per size\n", routes)
	for _, n := range sizes {
		if reason := set.cannotGrowTo(n); reason != "" {
			fmt.Printf("stopped before %d AZs: %s\n", n, reason)
			break
		}
		from := len(set.azs)
		start := time.Now()
		for i := from; i < n; i++ {
			set.addAZ(i + 1)
		}
		if err := set.waitConverged(10 * time.Minute); err != nil {
			t.Fatalf("%d AZs: %v", n, err)
		}
		row := azScaleRow{azs: n, join: time.Since(start)}
		set.measureRoutes(&row, routes)
		row.azRSSKiB, row.icsbRSSKiB = set.memory()
		rows = append(rows, row)
		fmt.Println(row)
		if row.lastMax > time.Minute {
			fmt.Printf("stopped after %d AZs: a route took %s to reach every AZ\n", n, row.lastMax)
			break
		}
	}
	writeAZScale(t, rows, routes)
}

// azSizes reads KOVN_BENCH_AZS.
func azSizes(t *testing.T) []int {
	spec := os.Getenv("KOVN_BENCH_AZS")
	if spec == "" {
		spec = "5,10,25,50,100,150,200"
	}
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			t.Fatalf("KOVN_BENCH_AZS=%q: want increasing sizes of at least 2", spec)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

type azScaleRow struct {
	azs                        int
	join                       time.Duration
	lastMedian, lastMax, p50AZ time.Duration // new route -> the last AZ (median, max), the median AZ (median)
	cpuPerRoute                float64       // seconds, all processes
	azRSSKiB, icsbRSSKiB       int64
}

func (r azScaleRow) String() string {
	return fmt.Sprintf("%3d AZs: joined in %5.1fs; new route -> every AZ median %s, max %s (median AZ %s); %.2f CPU s per route; %.1f MiB per AZ, IC-SB %.1f MiB",
		r.azs, r.join.Seconds(), r.lastMedian.Round(time.Millisecond), r.lastMax.Round(time.Millisecond), r.p50AZ.Round(time.Millisecond),
		r.cpuPerRoute, float64(r.azRSSKiB)/1024, float64(r.icsbRSSKiB)/1024)
}

// measureRoutes adds n subnets to az1's router one after another and times each one's route
// into every other AZ.
func (s *simSet) measureRoutes(row *azScaleRow, n int) {
	t := s.t
	cpu0 := s.cpuSeconds()
	var last, mid []time.Duration
	for range n {
		s.newRoutes++
		k := s.newRoutes
		prefix := netip.MustParsePrefix(fmt.Sprintf("172.16.%d.0/24", k))
		start := time.Now()
		s.azs[0].nbctl(t, "lrp-add", "lr", fmt.Sprintf("lr-new%d", k), fmt.Sprintf("0a:00:00:02:00:%02x", k),
			fmt.Sprintf("172.16.%d.1/24", k))
		lat, err := s.watch.waitAll(prefix, s.azNames()[1:], start, 2*time.Minute)
		if err != nil {
			t.Fatalf("%d AZs, route %s: %v", len(s.azs), prefix, err)
		}
		slices.Sort(lat)
		last, mid = append(last, lat[len(lat)-1]), append(mid, lat[len(lat)/2])
	}
	row.cpuPerRoute = (s.cpuSeconds() - cpu0) / float64(n)
	slices.Sort(last)
	slices.Sort(mid)
	row.lastMedian, row.lastMax, row.p50AZ = last[len(last)/2], last[len(last)-1], mid[len(mid)/2]
}

// writeAZScale writes the CSV and the two plots.
func writeAZScale(t *testing.T, rows []azScaleRow, routes int) {
	if len(rows) == 0 {
		t.Fatal("no size measured")
	}
	var csv strings.Builder
	csv.WriteString("azs,join_ms,route_last_median_ms,route_last_max_ms,route_median_az_ms,cpu_s_per_route,az_rss_kib,icsb_rss_kib\n")
	var lastMed, lastMax, midAZ, perAZ, icsb plotter.XYs
	for _, r := range rows {
		fmt.Fprintf(&csv, "%d,%d,%d,%d,%d,%.3f,%d,%d\n", r.azs, r.join.Milliseconds(), r.lastMedian.Milliseconds(),
			r.lastMax.Milliseconds(), r.p50AZ.Milliseconds(), r.cpuPerRoute, r.azRSSKiB, r.icsbRSSKiB)
		x := float64(r.azs)
		lastMed = append(lastMed, plotter.XY{X: x, Y: float64(r.lastMedian.Milliseconds())})
		lastMax = append(lastMax, plotter.XY{X: x, Y: float64(r.lastMax.Milliseconds())})
		midAZ = append(midAZ, plotter.XY{X: x, Y: float64(r.p50AZ.Milliseconds())})
		perAZ = append(perAZ, plotter.XY{X: x, Y: float64(r.azRSSKiB) / 1024})
		icsb = append(icsb, plotter.XY{X: x, Y: float64(r.icsbRSSKiB) / 1024})
	}
	dir := outDir(t)
	if err := os.WriteFile(filepath.Join(dir, "azscale.csv"), []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	route := report.Lines{Title: "New subnet in az1 -> route learned in every other AZ (simulated AZs, 2 cores)",
		XLabel: "availability zones", YLabel: "ms",
		Series: routeSeries(lastMed, lastMax, midAZ, routes)}
	mem := report.Lines{Title: "Memory of the clusterset (peak resident set)", XLabel: "availability zones", YLabel: "MiB",
		Series: []report.Series{{Name: "one AZ: NB + SB + ovn-northd + ovn-ic (median AZ)", Points: perAZ},
			{Name: "IC-SB ovsdb-server", Points: icsb}}}
	for name, l := range map[string]report.Lines{"azscale-route.png": route, "azscale-memory.png": mem} {
		if err := l.WritePNG(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("plot: %s\n", filepath.Join(dir, name))
	}
}

// routeSeries names the route plot's curves.
func routeSeries(lastMed, lastMax, midAZ plotter.XYs, routes int) []report.Series {
	return []report.Series{
		{Name: fmt.Sprintf("last AZ, median of %d routes", routes), Points: lastMed},
		{Name: fmt.Sprintf("last AZ, slowest of %d routes", routes), Points: lastMax},
		{Name: "median AZ", Points: midAZ}}
}

// measureCtx bounds libovsdb connects of the bench.
func measureCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}
