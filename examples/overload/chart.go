package main

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// charted are the strategies WriteChart draws, one panel each.
var charted = []string{StrategyOracle, StrategyFailsafe, StrategyPacer}

// The chart's layout, in pixels: each panel is a plot of the requests in
// service over a strip of the attempts refused.
const (
	chartLeft, chartRight, chartTop = 50, 20, 50
	plotW, plotH, stripH, panelGap  = 680, 120, 36, 62
)

// WriteChart writes an SVG chart of the requests in service at the server
// over the run, one panel for each of the oracle, failsafe-go and
// pace.Pacer rows found in results, with C drawn as a step line, and
// under each the 529s the server sent per second. It is drawn by hand so
// that the example needs no plotting module.
func WriteChart(w io.Writer, cfg Config, results []Result) error {
	var panels []Result
	for _, name := range charted {
		for _, r := range results {
			if r.Strategy == name {
				panels = append(panels, r)
			}
		}
	}
	// One scale for every panel, so that they compare at a glance.
	most, mostRefused := 0.0, 1
	for _, p := range cfg.Phases {
		most = max(most, float64(p.C))
	}
	for _, r := range panels {
		for i, n := range r.InService {
			most = max(most, n)
			mostRefused = max(mostRefused, r.RefusedPerSecond[i])
		}
	}
	c := chart{w: w, cfg: cfg, span: cfg.Duration().Seconds(), yMax: 5 * float64(int(most/5)+1), refusedMax: mostRefused}
	height := chartTop + len(panels)*(plotH+stripH+panelGap)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		chartLeft+plotW+chartRight, height)
	fmt.Fprintf(w, `<text x="10" y="20" font-size="14">Requests in service at the server, %d callers, C %s, %s a phase</text>`+"\n",
		cfg.Callers, strings.ReplaceAll(capacities(cfg.Phases), ",", " → "), durText(cfg.Phases[0].For))
	fmt.Fprintf(w, `<line x1="%d" y1="34" x2="%d" y2="34" stroke="#3182bd" stroke-width="2"/><text x="%d" y="38">in service, mean over each second</text>`+"\n",
		chartLeft, chartLeft+24, chartLeft+30)
	fmt.Fprintf(w, `<line x1="%d" y1="34" x2="%d" y2="34" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/><text x="%d" y="38">C, the server's capacity</text>`+"\n",
		chartLeft+250, chartLeft+274, chartLeft+280)
	fmt.Fprintf(w, `<rect x="%d" y="28" width="14" height="10" fill="#bbb"/><text x="%d" y="38">529s per second (strip below)</text>`+"\n",
		chartLeft+440, chartLeft+460)
	for i, r := range panels {
		c.panel(r, float64(chartTop+i*(plotH+stripH+panelGap)+20))
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

// chart holds what every panel of WriteChart shares.
type chart struct {
	w          io.Writer
	cfg        Config
	span       float64 // seconds on the x axis
	yMax       float64 // requests at the top of the plot
	refusedMax int     // 529s per second at the top of the strip
}

// x returns the abscissa of s seconds into the run.
func (c chart) x(s float64) float64 { return chartLeft + s/c.span*plotW }

// panel draws r's plot with its top at y0, and its strip below.
func (c chart) panel(r Result, y0 float64) {
	w := c.w
	y := func(n float64) float64 { return y0 + plotH - n/c.yMax*plotH }
	fmt.Fprintf(w, `<text x="%d" y="%.0f">%s: %s of attempts refused, %s of calls failed</text>`+"\n",
		chartLeft, y0-6, html.EscapeString(r.Strategy), pct(r.RefusedShare()), pct(r.FailedShare()))
	fmt.Fprintf(w, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", chartLeft, y0, plotW, plotH)
	for n := 0.0; n <= c.yMax; n += 5 {
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", chartLeft-6, y(n)+4, n)
	}
	// C, a step at each change.
	var path strings.Builder
	at := 0.0
	for j, p := range c.cfg.Phases {
		verb := " L"
		if j == 0 {
			verb = "M"
		}
		fmt.Fprintf(&path, "%s%.1f,%.1f", verb, c.x(at), y(float64(p.C)))
		at += p.For.Seconds()
		fmt.Fprintf(&path, " L%.1f,%.1f", c.x(at), y(float64(p.C)))
	}
	fmt.Fprintf(w, `<path d="%s" fill="none" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", path.String())
	var pts strings.Builder
	for s, n := range r.InService {
		fmt.Fprintf(&pts, "%.1f,%.1f ", c.x(float64(s)+0.5), y(n))
	}
	fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="#3182bd" stroke-width="1.5"/>`+"\n", strings.TrimSpace(pts.String()))
	c.strip(r, y0+plotH)
}

// strip draws r's 529s per second as bars hanging under the plot, whose
// bottom is at top.
func (c chart) strip(r Result, top float64) {
	w := c.w
	barW := plotW / c.span
	for s, n := range r.RefusedPerSecond {
		if n > 0 {
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="#bbb"/>`+"\n",
				c.x(float64(s)), top, barW, float64(n)/float64(c.refusedMax)*stripH)
		}
	}
	fmt.Fprintf(w, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#999"/>`+"\n", chartLeft, top+stripH, chartLeft+plotW, top+stripH)
	fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end" fill="#777">%d/s</text>`+"\n", chartLeft-6, top+stripH, c.refusedMax)
	step := 30.0 // seconds between labels: at most a dozen of them
	for _, st := range []float64{60, 120, 300, 600, 1800, 3600} {
		if c.span/step > 12 {
			step = st
		}
	}
	for s := 0.0; s <= c.span; s += step {
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f s</text>`+"\n", c.x(s), top+stripH+14, s)
	}
}

// durText formats a duration for titles: 90 s and 500 ms rather than
// 1m30s and 500ms.
func durText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}
