package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot is one latency-against-pod-count chart.
type Plot struct {
	Title string
	// Lat[i] is the latency of the pod created when i pods existed; negative = never seen.
	Lat   []time.Duration
	Bands []Band
	// Goal, if set, is drawn as a horizontal line (e.g. 100 ms for p99).
	Goal time.Duration
	// Notes are extra legend lines (cold start, baseline, CPU), drawn without a symbol.
	Notes []string
}

// WritePNG renders p to path (directories created) as a 1000x600 PNG.
func (p Plot) WritePNG(path string) error {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = "pods in the cluster when the pod was created"
	pl.Y.Label.Text = "create -> Logical_Switch_Port in NB (ms)"
	pl.Y.Min = 0
	pl.Add(plotter.NewGrid())
	var pts plotter.XYs
	for i, d := range p.Lat {
		if d >= 0 {
			pts = append(pts, plotter.XY{X: float64(i), Y: ms(d)})
		}
	}
	if len(pts) > 0 {
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Radius = vg.Points(0.8)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Color = color.RGBA{R: 120, G: 160, B: 220, A: 255}
		pl.Add(sc)
		pl.Legend.Add("each pod", sc)
	}
	if err := p.addBandLines(pl); err != nil {
		return err
	}
	if p.Goal > 0 && len(p.Lat) > 0 {
		g, err := plotter.NewLine(plotter.XYs{{X: 0, Y: ms(p.Goal)}, {X: float64(len(p.Lat)), Y: ms(p.Goal)}})
		if err != nil {
			return err
		}
		g.Color, g.Dashes = color.RGBA{G: 150, A: 255}, []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(g)
		pl.Legend.Add(fmt.Sprintf("goal p99 %s", p.Goal), g)
	}
	for _, n := range p.Notes {
		pl.Legend.Add(n)
	}
	pl.Legend.Top, pl.Legend.Left = true, true
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return pl.Save(10*vg.Inch, 6*vg.Inch, path)
}

// addBandLines draws p50 and p99 per band at the band's middle.
func (p Plot) addBandLines(pl *plot.Plot) error {
	if len(p.Bands) == 0 {
		return nil
	}
	for _, q := range []struct {
		name string
		get  func(Summary) time.Duration
		col  color.RGBA
	}{
		{"p50 per band", func(s Summary) time.Duration { return s.P50 }, color.RGBA{R: 30, G: 60, B: 160, A: 255}},
		{"p99 per band", func(s Summary) time.Duration { return s.P99 }, color.RGBA{R: 200, G: 30, B: 30, A: 255}},
	} {
		var xy plotter.XYs
		for _, b := range p.Bands {
			if b.N > 0 {
				xy = append(xy, plotter.XY{X: float64(b.From+b.To) / 2, Y: ms(q.get(b.Summary))})
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, lp, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = q.col, vg.Points(2)
		lp.Color, lp.Shape = q.col, draw.CircleGlyph{}
		pl.Add(l, lp)
		pl.Legend.Add(q.name, l, lp)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
