package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// dashed are the rows drawn dashed: failsafe-go's line falls on the
// fixed delay's, the same delay with the same draws.
var dashed = map[string]bool{RowFailsafe: true}

// colors gives each row its line's color.
var colors = map[string]string{
	RowNone: "#636363", RowFixed: "#3182bd", RowAdaptive: "#d62728", RowFailsafe: "#31a354",
	RowBudget: "#d62728", RowUnbudgeted: "#ff7f0e",
}

// The chart's layout, in pixels: panels one above the other, each a plot
// with its legend on the right.
const (
	chartLeft, chartTop, chartW  = 60, 40, 820
	plotW, plotH, panelGap       = 540, 260, 80
	legendX                      = chartLeft + plotW + 20
	pointsPerPanel               = 400
	chartTitle, chartTitleOffset = "Share of calls slower than a time to headers (log-log)", 20
)

// WriteChart writes an SVG chart of the calls' time to headers, one panel
// per scenario found in results: for each row, the share of calls whose
// time to headers exceeded t, against t, both on log scales, so that the
// tail shows (a curve crosses the p99 line at its p99). The long tail's
// panel marks the Model's p95, the fixed delay. It is drawn by hand so
// that the example needs no plotting module.
func WriteChart(w io.Writer, cfg Config, results []Result) error {
	var panels [][]Result
	for _, scenario := range []string{ScenarioTail, ScenarioSaturated} {
		var rs []Result
		for _, r := range results {
			if r.Scenario == scenario && len(r.Latencies) > 0 {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			panels = append(panels, rs)
		}
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartTop+len(panels)*(plotH+panelGap))
	fmt.Fprintf(w, `<text x="10" y="%d" font-size="14">%s</text>`+"\n", chartTitleOffset, chartTitle)
	for i, rs := range panels {
		newPanel(cfg, rs, float64(chartTop+i*(plotH+panelGap)+20)).draw(w)
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

// panel is one scenario's plot.
type panel struct {
	cfg     Config
	rs      []Result
	top     float64 // the plot's top edge
	xLo     float64 // log10 of the seconds at the left edge
	xHi     float64 // and at the right
	yDecade int     // the bottom edge is 10^-yDecade of the calls
}

// newPanel fits the axes to rs: whole decades around every time to
// headers, and down to one call in the largest run.
func newPanel(cfg Config, rs []Result, top float64) panel {
	lo, hi, most := math.Inf(1), math.Inf(-1), 1
	for _, r := range rs {
		lo = min(lo, math.Log10(max(r.Latencies[0].Seconds(), 1e-6)))
		hi = max(hi, math.Log10(max(r.Latencies[len(r.Latencies)-1].Seconds(), 1e-6)))
		most = max(most, len(r.Latencies))
	}
	return panel{cfg: cfg, rs: rs, top: top, xLo: math.Floor(lo), xHi: max(math.Ceil(hi), math.Floor(lo)+1),
		yDecade: int(math.Ceil(math.Log10(float64(most))))}
}

// x returns the abscissa of d.
func (p panel) x(d time.Duration) float64 {
	return chartLeft + (math.Log10(d.Seconds())-p.xLo)/(p.xHi-p.xLo)*plotW
}

// y returns the ordinate of share, which must be positive.
func (p panel) y(share float64) float64 {
	return p.top + (-math.Log10(share))/float64(p.yDecade)*plotH
}

func (p panel) draw(w io.Writer) {
	fmt.Fprintf(w, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", chartLeft, p.top-8,
		html.EscapeString(describeShort(p.cfg, p.rs[0].Scenario)))
	fmt.Fprintf(w, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", chartLeft, p.top, plotW, plotH)
	for k := 0; k <= p.yDecade; k++ {
		share := math.Pow(10, -float64(k))
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", chartLeft, p.y(share), chartLeft+plotW, p.y(share))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", chartLeft-6, p.y(share)+4, shareText(share))
	}
	for _, ref := range []struct {
		share float64
		name  string
	}{{0.01, "p99"}, {0.001, "p99.9"}} {
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbb" stroke-dasharray="2,3"/>`+"\n",
			chartLeft, p.y(ref.share), chartLeft+plotW, p.y(ref.share))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" fill="#777">%s</text>`+"\n", chartLeft+plotW-38, p.y(ref.share)-3, ref.name)
	}
	for e := p.xLo; e <= p.xHi; e++ {
		d := time.Duration(math.Pow(10, e) * float64(time.Second))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`+"\n", p.x(d), p.top, p.x(d), p.top+plotH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", p.x(d), p.top+plotH+15, durText(d))
	}
	fmt.Fprintf(w, `<text x="%d" y="%.0f" text-anchor="middle" fill="#555">time to headers</text>`+"\n",
		chartLeft+plotW/2, p.top+plotH+32)
	if p.rs[0].Scenario == ScenarioTail {
		d := p.cfg.Model.Quantile(0.95)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#3182bd" stroke-dasharray="5,3"/>`+"\n",
			p.x(d), p.top, p.x(d), p.top+plotH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" fill="#3182bd">p95 of the model, %s</text>`+"\n", p.x(d)+4, p.top+14, msText(d))
	}
	for i, r := range p.rs {
		color, dash := colors[r.Row], ""
		if dashed[r.Row] {
			dash = ` stroke-dasharray="6,4"`
		}
		fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.8"%s/>`+"\n", p.curve(r), color, dash)
		ly := p.top + 10 + float64(i)*34
		fmt.Fprintf(w, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="%s" stroke-width="2"%s/>`+"\n", legendX, ly, legendX+20, ly, color, dash)
		fmt.Fprintf(w, `<text x="%d" y="%.0f">%s</text>`+"\n", legendX+26, ly+4, html.EscapeString(r.Row))
		fmt.Fprintf(w, `<text x="%d" y="%.0f" fill="#555">p99 %s, %s extra</text>`+"\n", legendX+26, ly+18, msText(r.P99), pct(r.Extra()))
	}
}

// curve returns the points of r's line: the share of its calls slower
// than t, at pointsPerPanel times spread evenly on the log scale, down to
// the slowest call.
func (p panel) curve(r Result) string {
	var b strings.Builder
	n := len(r.Latencies)
	for i := 0; i <= pointsPerPanel; i++ {
		e := p.xLo + (p.xHi-p.xLo)*float64(i)/pointsPerPanel
		d := time.Duration(math.Pow(10, e) * float64(time.Second))
		slower := n - sort.Search(n, func(j int) bool { return r.Latencies[j] > d })
		if slower == 0 {
			break
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", p.x(d), p.y(float64(slower)/float64(n)))
	}
	return strings.TrimSpace(b.String())
}

// describeShort names a panel's scenario.
func describeShort(cfg Config, scenario string) string {
	if scenario == ScenarioSaturated {
		return fmt.Sprintf("Saturated: %d callers, %d served at a time, %s each, the rest queued", cfg.Saturated.Callers, cfg.C, serviceText(cfg))
	}
	return fmt.Sprintf("Long tail: %d callers, lognormal median %s, %g%% stragglers of %s to %s",
		cfg.Tail.Callers, msText(cfg.Model.Median), 100*cfg.Model.Stragglers, durText(cfg.Model.StragglerMin), durText(cfg.Model.StragglerMax))
}

// shareText formats a share of calls on the y axis: 100%, 10%, 1%,
// 0.1%, 0.01%.
func shareText(s float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", 100*s), "0"), ".") + "%"
}

// durText formats an axis time: 1 ms, 10 ms, 100 ms, 1 s, 10 s.
func durText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}
