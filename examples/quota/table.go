package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints one row per strategy: attempts refused, calls failed,
// goodput as a share of the quota, and the call latency's p50 and p99.
func WriteTable(w io.Writer, cfg Config, results []Result, markdown bool) {
	unit := fmt.Sprintf("%.0f requests and %.0f tokens a minute", cfg.RPM, cfg.TPM)
	if windowed(cfg.Format) {
		unit = fmt.Sprintf("%.0f requests a minute, fixed windows", cfg.RPM)
	}
	fmt.Fprintf(w, "%s headers, %d callers, %v, %s\n\n", cfg.Format, cfg.Callers, cfg.Duration, unit)
	head := []string{"strategy", "attempts", "refused", "calls failed", "goodput", "p50", "p99"}
	rows := [][]string{head}
	for _, r := range results {
		rows = append(rows, []string{r.Strategy, fmt.Sprint(r.Attempts), fmt.Sprintf("%.2f%%", 100*r.RefusedShare()),
			fmt.Sprint(r.Failed), fmt.Sprintf("%.1f%%", 100*r.Goodput), seconds1(r.P50), seconds1(r.P99)})
	}
	if markdown {
		for i, row := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			if i == 0 {
				fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
			}
		}
		return
	}
	widths := make([]int, len(head))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, row := range rows {
		for i, c := range row {
			if i == 0 {
				fmt.Fprintf(w, "%-*s", widths[i], c)
			} else {
				fmt.Fprintf(w, "  %*s", widths[i], c)
			}
		}
		fmt.Fprintln(w)
	}
}

func seconds1(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
