package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// table is a header and rows of cells; the first column is text and the
// others are numbers.
type table struct {
	header []string
	rows   [][]string
}

// write prints t as aligned text (first column left, the rest right), or
// as a markdown table.
func (t table) write(w io.Writer, markdown bool) error {
	if markdown {
		return t.writeMarkdown(w)
	}
	width := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		for i, cell := range r {
			pad := strings.Repeat(" ", width[i]-len(cell))
			switch {
			case i == 0:
				b.WriteString(cell + pad)
			default:
				b.WriteString("  " + pad + cell)
			}
		}
		b.WriteString("\n")
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t table) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.header, " | ") + " |\n|")
	for i := range t.header {
		if i == 0 {
			b.WriteString(" --- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// herdTable lays out the results of one herd, one strategy a row.
func herdTable(results []Result) table {
	t := table{header: []string{"strategy", "calls", "peak/tick once up", "rejected", "last served", "never served"}}
	for _, r := range results {
		t.rows = append(t.rows, []string{
			r.Strategy,
			thousands(r.Calls),
			thousands(r.Peak),
			fmt.Sprintf("%.1f%%", 100*r.RejectedShare()),
			lastServed(r),
			thousands(r.NeverServed()),
		})
	}
	return t
}

// occTables lays out the OCC model's results: one table of calls and one
// of completion times, a row per contention level, a column per strategy.
func occTables(results []OCCResult) (calls, times table) {
	calls.header = []string{"clients"}
	times.header = []string{"clients"}
	row := map[int]int{} // clients -> row index
	for _, r := range results {
		i, ok := row[r.Clients]
		if !ok {
			i = len(calls.rows)
			row[r.Clients] = i
			n := strconv.Itoa(r.Clients)
			calls.rows = append(calls.rows, []string{n})
			times.rows = append(times.rows, []string{n})
		}
		if i == 0 {
			calls.header = append(calls.header, r.Strategy)
			times.header = append(times.header, r.Strategy)
		}
		calls.rows[i] = append(calls.rows[i], fmt.Sprintf("%.0f", r.Calls))
		times.rows[i] = append(times.rows[i], fmt.Sprintf("%.0f ms", float64(r.Time)/float64(time.Millisecond)))
	}
	return calls, times
}

// thousands formats n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

// lastServed is when the last client was served, or "-" if none was.
func lastServed(r Result) string {
	if r.Served == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", r.LastServed.Seconds())
}
