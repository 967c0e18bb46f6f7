package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// palette tells the strategies apart for most kinds of colour vision
// (Okabe and Ito's colours, in Strategies order).
var palette = []color.Color{
	color.RGBA{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // vermillion
	color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, // reddish purple
	color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
	color.RGBA{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, // orange
	color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, // bluish green
	color.RGBA{A: 0xff},                            // black
}

// chartWidth and chartHeight are the size of the chart.
const (
	chartWidth  = 9 * vg.Inch
	chartHeight = 5 * vg.Inch
)

// saveChart writes the chart of results to the file path, in the format
// its extension names (.svg, .png, .pdf, ...).
func saveChart(path string, c Config, results []Result, until time.Duration) error {
	p, err := newChart(c, results, until)
	if err != nil {
		return err
	}
	return p.Save(chartWidth, chartHeight, path)
}

// newChart draws calls per tick over the first until of simulated time,
// one line per strategy, with the service's capacity for reference.
func newChart(c Config, results []Result, until time.Duration) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s clients, service down for %s, capacity %d calls per %s",
		thousands(c.Clients), c.Down, c.Capacity, c.Tick)
	p.X.Label.Text = "simulated time (s)"
	p.Y.Label.Text = fmt.Sprintf("calls sent per %s tick (log scale)", c.Tick)
	p.X.Min, p.X.Max = 0, until.Seconds()
	// A log scale keeps the jittered strategies' tens of calls per tick
	// readable beside the herds of a thousand; log(1+y) keeps the quiet
	// ticks, which a plain log scale cannot show. The headroom above the
	// largest herd leaves room for the legend.
	p.Y.Scale = log1pScale{}
	p.Y.Min, p.Y.Max = 0, 8*float64(c.Clients)
	p.Y.Tick.Marker = log1pTicks{top: float64(c.Clients)}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

	ticks := int(min(until, c.Horizon) / c.Tick)
	for i, r := range results {
		pts := make(plotter.XYs, ticks)
		for t := range pts {
			pts[t].X = (time.Duration(t) * c.Tick).Seconds()
			if t < len(r.PerTick) {
				pts[t].Y = float64(r.PerTick[t])
			}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = palette[i%len(palette)]
		l.Dashes = plotutil.Dashes(i)
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(r.Strategy, l)
	}
	capacity, err := plotter.NewLine(plotter.XYs{
		{X: c.Down.Seconds(), Y: float64(c.Capacity)},
		{X: until.Seconds(), Y: float64(c.Capacity)},
	})
	if err != nil {
		return nil, err
	}
	capacity.Color = color.Gray{Y: 96}
	capacity.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
	p.Add(capacity)
	p.Legend.Add("capacity once up", capacity)
	return p, nil
}

// log1pScale maps y to log(1+y), so that zero stays on the chart.
type log1pScale struct{}

func (log1pScale) Normalize(lo, hi, y float64) float64 {
	lo, hi = math.Log1p(max(lo, 0)), math.Log1p(max(hi, 0))
	if hi <= lo {
		return 0
	}
	return (math.Log1p(max(y, 0)) - lo) / (hi - lo)
}

// log1pTicks labels 0 and the powers of ten up to top.
type log1pTicks struct{ top float64 }

func (lt log1pTicks) Ticks(_, hi float64) []plot.Tick {
	hi = min(hi, lt.top)
	ticks := []plot.Tick{{Value: 0, Label: "0"}}
	for p := 1.0; p <= hi; p *= 10 {
		ticks = append(ticks, plot.Tick{Value: p, Label: strconv.FormatFloat(p, 'f', -1, 64)})
		for m := 2.0; m < 10 && m*p <= hi; m++ {
			ticks = append(ticks, plot.Tick{Value: m * p})
		}
	}
	return ticks
}
