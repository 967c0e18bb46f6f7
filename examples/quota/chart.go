package main

import (
	"fmt"
	"html"
	"io"
	"time"
)

// WriteChart writes an SVG bar chart of each strategy's p50 and p99 call
// latency, drawn by hand so that the example needs no plotting module.
func WriteChart(w io.Writer, cfg Config, results []Result) error {
	const (
		left, top, barH, gap, width = 220, 40, 14, 12, 420
	)
	var most time.Duration
	for _, r := range results {
		most = max(most, r.P99)
	}
	if most <= 0 {
		most = time.Second
	}
	height := top + len(results)*(2*barH+gap) + 30
	bar := func(d time.Duration) float64 { return float64(d) / float64(most) * width }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		left+width+80, height)
	fmt.Fprintf(w, `<text x="10" y="20" font-size="14">Call latency, %s headers, %d callers, %v (p50 light, p99 dark)</text>`+"\n",
		html.EscapeString(cfg.Format), cfg.Callers, cfg.Duration)
	for i, r := range results {
		y := top + i*(2*barH+gap)
		fmt.Fprintf(w, `<text x="10" y="%d">%s</text>`+"\n", y+barH+4, html.EscapeString(r.Strategy))
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#9ecae1"/>`+"\n", left, y, bar(r.P50), barH)
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%.1f s</text>`+"\n", float64(left)+bar(r.P50)+4, y+barH-3, r.P50.Seconds())
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#3182bd"/>`+"\n", left, y+barH, bar(r.P99), barH)
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%.1f s</text>`+"\n", float64(left)+bar(r.P99)+4, y+2*barH-3, r.P99.Seconds())
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}
