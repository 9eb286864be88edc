package report

import (
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one named curve of a Lines chart.
type Series struct {
	Name   string
	Points plotter.XYs
}

// Lines is a chart of curves against one X axis (e.g. route propagation time against the
// number of availability zones).
type Lines struct {
	Title, XLabel, YLabel string
	Series                []Series
	Notes                 []string // extra legend lines, drawn without a symbol
}

var seriesColors = []color.RGBA{{R: 30, G: 60, B: 160, A: 255}, {R: 200, G: 30, B: 30, A: 255},
	{G: 140, B: 60, A: 255}, {R: 160, G: 100, A: 255}}

// WritePNG renders l to path (directories created) as a 1000x600 PNG, Y from 0.
func (l Lines) WritePNG(path string) error {
	pl := plot.New()
	pl.Title.Text, pl.X.Label.Text, pl.Y.Label.Text = l.Title, l.XLabel, l.YLabel
	pl.Y.Min = 0
	pl.Add(plotter.NewGrid())
	for i, s := range l.Series {
		if len(s.Points) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(s.Points)
		if err != nil {
			return err
		}
		col := seriesColors[i%len(seriesColors)]
		line.Color, line.Width = col, vg.Points(2)
		points.Color, points.Shape = col, draw.CircleGlyph{}
		pl.Add(line, points)
		pl.Legend.Add(s.Name, line, points)
	}
	for _, n := range l.Notes {
		pl.Legend.Add(n)
	}
	pl.Legend.Top, pl.Legend.Left = true, true
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return pl.Save(10*vg.Inch, 6*vg.Inch, path)
}
