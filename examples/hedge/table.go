package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints a table for each scenario found in results, with a
// line that states it: one row per setting, with the calls, the p50, p99
// and p99.9 of their time to headers, the extra attempts and the bodies
// left open.
func WriteTable(w io.Writer, cfg Config, results []Result, markdown bool) {
	for i, scenario := range []string{ScenarioTail, ScenarioSaturated} {
		var rows [][]string
		for _, r := range results {
			if r.Scenario == scenario {
				rows = append(rows, []string{r.Row, fmt.Sprint(r.Calls), msText(r.P50), msText(r.P99), msText(r.P999),
					pct(r.Extra()), fmt.Sprint(r.Open)})
			}
		}
		if len(rows) == 0 {
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\n\n", describe(cfg, scenario))
		head := []string{"row", "calls", "p50", "p99", "p99.9", "extra attempts", "bodies open"}
		writeRows(w, append([][]string{head}, rows...), markdown)
	}
}

// describe states scenario in one line.
func describe(cfg Config, scenario string) string {
	if scenario == ScenarioSaturated {
		return fmt.Sprintf("%s: %d callers, %d calls; the server serves %d at a time, %s each, and queues the rest",
			scenario, cfg.Saturated.Callers, cfg.Saturated.Calls, cfg.C, serviceText(cfg))
	}
	m := cfg.Model
	return fmt.Sprintf("%s: %d callers, %d calls; lognormal, median %s, sigma %.3f (p95 %s), plus %s stragglers of %s to %s; p95 of the model %s",
		scenario, cfg.Tail.Callers, cfg.Tail.Calls, msText(m.Median), m.Sigma, msText(time.Duration(float64(m.Median)*ratio95(m.Sigma))),
		fmt.Sprintf("%g%%", 100*m.Stragglers), durText(m.StragglerMin), durText(m.StragglerMax), msText(m.Quantile(0.95)))
}

// serviceText states the Queue's service time: 18 to 22 ms, or 20 ms.
func serviceText(cfg Config) string {
	lo, hi := float64(cfg.Service)*(1-cfg.Spread), float64(cfg.Service)*(1+cfg.Spread)
	if lo == hi {
		return durText(cfg.Service)
	}
	return fmt.Sprintf("%s to %s", durText(time.Duration(lo)), durText(time.Duration(hi)))
}

// writeRows prints rows, the first of them the head, as markdown or as
// aligned text.
func writeRows(w io.Writer, rows [][]string, markdown bool) {
	if markdown {
		for i, row := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			if i == 0 {
				fmt.Fprintf(w, "| --- |%s\n", strings.Repeat(" ---: |", len(row)-1))
			}
		}
		return
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, row := range rows {
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				fmt.Fprint(w, c+pad)
			} else {
				fmt.Fprint(w, "  "+pad+c)
			}
		}
		fmt.Fprintln(w)
	}
}

// msText formats a time to headers: 21.4 ms below a second, 1.52 s above.
func msText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
