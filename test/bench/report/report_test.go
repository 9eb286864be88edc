package report

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"
)

func TestSummarizeNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted input
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(ds)
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P90 != 90*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatal("input was reordered")
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("empty input")
	}
}

func TestBandsSkipUnseen(t *testing.T) {
	lat := []time.Duration{1, 2, -1, 4, 5}
	b := Bands(lat, 2)
	if len(b) != 3 || b[1].N != 1 || b[2].From != 4 || b[2].To != 5 || Missing(lat) != 1 {
		t.Fatalf("%+v", b)
	}
}

func TestParseProc(t *testing.T) {
	// a command name with spaces and a parenthesis must not shift the fields
	stat := "42 (kovn (x) ctl) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 1000 50"
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 3.25 {
		t.Fatalf("cpu %v err %v", cpu, err)
	}
	if v := parseStatusKiB("Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t 1 kB\n", "VmHWM:"); v != 123456 {
		t.Fatalf("VmHWM %d", v)
	}
	self, err := ReadProc(os.Getpid())
	if err != nil || self.PeakRSSKiB <= 0 {
		t.Fatalf("own process: %+v %v", self, err)
	}
}

func TestWritePNG(t *testing.T) {
	lat := make([]time.Duration, 3000)
	for i := range lat {
		lat[i] = time.Duration(20+i/50) * time.Millisecond
	}
	lat[7] = -1
	path := filepath.Join(t.TempDir(), "sub", "lat.png")
	p := Plot{Title: "test", Lat: lat, Bands: Bands(lat, 1000), Goal: 100 * time.Millisecond, Notes: []string{"cold start 1s"}}
	if err := p.WritePNG(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 500 {
		t.Fatalf("not a usable PNG: %v", err)
	}
}

func TestLinesWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lines.png")
	l := Lines{Title: "t", XLabel: "x", YLabel: "y", Notes: []string{"note"},
		Series: []Series{{Name: "a", Points: plotter.XYs{{X: 5, Y: 1}, {X: 10, Y: 3}}}, {Name: "empty"}}}
	if err := l.WritePNG(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() < 500 {
		t.Fatalf("not a usable PNG: %v", err)
	}
}
