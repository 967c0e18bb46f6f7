package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints one row per strategy: the calls and the share that
// failed, the share of attempts refused (over the run, and after the
// warm-up), goodput as a share of capacity, the call latency's p50 and
// p99, and the time to re-converge after each change of C.
func WriteTable(w io.Writer, cfg Config, results []Result, markdown bool) {
	fmt.Fprintf(w, "%d callers, C %s, %s a phase, %s a request\n\n", cfg.Callers,
		strings.ReplaceAll(capacities(cfg.Phases), ",", " → "), durText(cfg.Phases[0].For), durText(cfg.Service))
	head := []string{"strategy", "calls", "failed", "refused", "refused after " + durText(cfg.Warmup),
		"goodput", "p50", "p99"}
	for i := 1; i < len(cfg.Phases); i++ {
		head = append(head, fmt.Sprintf("settle %d→%d", cfg.Phases[i-1].C, cfg.Phases[i].C))
	}
	rows := [][]string{head}
	for _, r := range results {
		row := []string{r.Strategy, fmt.Sprint(r.Calls), pct(r.FailedShare()), pct(r.RefusedShare()),
			pct(r.LateRefusedShare()), fmt.Sprintf("%.1f%%", 100*r.Goodput), seconds1(r.P50), seconds1(r.P99)}
		for i := 1; i < len(r.Settle); i++ {
			row = append(row, settleText(r.Settle[i]))
		}
		rows = append(rows, row)
	}
	if markdown {
		for i, row := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			if i == 0 {
				fmt.Fprintf(w, "| --- |%s\n", strings.Repeat(" ---: |", len(head)-1))
			}
		}
		return
	}
	widths := make([]int, len(head))
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

func seconds1(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
