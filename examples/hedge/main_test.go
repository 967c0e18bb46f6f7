package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr string
	}{
		{name: "defaults", want: DefaultConfig()},
		{name: "loads and seed", args: []string{"-calls", "5000", "-callers", "10", "-saturated-calls", "2000",
			"-saturated-callers", "16", "-c", "4", "-spread", "0.5", "-seed", "7"},
			want: func() Config {
				c := DefaultConfig()
				c.Tail, c.Saturated, c.C, c.Spread, c.Seed = Load{Callers: 10, Calls: 5000}, Load{Callers: 16, Calls: 2000}, 4, 0.5, 7
				return c
			}()},
		{name: "no calls", args: []string{"-calls", "0"}, wantErr: "-calls"},
		{name: "no callers", args: []string{"-saturated-callers", "0"}, wantErr: "-saturated-callers"},
		{name: "no capacity", args: []string{"-c", "0"}, wantErr: "-c"},
		{name: "spread of 1", args: []string{"-spread", "1"}, wantErr: "-spread"},
		{name: "stray argument", args: []string{"now"}, wantErr: "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one about %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o.cfg); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteTableAndChart(t *testing.T) {
	ms := time.Millisecond
	results := []Result{
		{Scenario: ScenarioTail, Row: RowNone, Calls: 1000, Attempts: 1000, P50: 20 * ms, P99: 1500 * ms, P999: 1950 * ms,
			Latencies: []time.Duration{10 * ms, 20 * ms, 1500 * ms}},
		{Scenario: ScenarioTail, Row: RowAdaptive, Calls: 1000, Attempts: 1052, P50: 20 * ms, P99: 65 * ms, P999: 88 * ms,
			Latencies: []time.Duration{10 * ms, 20 * ms, 65 * ms}},
		{Scenario: ScenarioSaturated, Row: RowBudget, Calls: 500, Attempts: 560, Open: 1, P50: 101 * ms, P99: 230 * ms, P999: 240 * ms,
			Latencies: []time.Duration{100 * ms, 230 * ms}},
	}
	var b strings.Builder
	WriteTable(&b, DefaultConfig(), results, true)
	want := `long tail: 20 callers, 100000 calls; lognormal, median 20.0 ms, sigma 0.421 (p95 40.0 ms), plus 2% stragglers of 1 s to 2 s; p95 of the model 44.0 ms

| row | calls | p50 | p99 | p99.9 | extra attempts | bodies open |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| no hedging | 1000 | 20.0 ms | 1.50 s | 1.95 s | 0.00% | 0 |
| adaptive | 1000 | 20.0 ms | 65.0 ms | 88.0 ms | 5.20% | 0 |

saturated: 40 callers, 40000 calls; the server serves 8 at a time, 18 ms to 22 ms each, and queues the rest

| row | calls | p50 | p99 | p99.9 | extra attempts | bodies open |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| adaptive, Budget | 500 | 101.0 ms | 230.0 ms | 240.0 ms | 12.00% | 1 |
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	b.Reset()
	WriteTable(&b, DefaultConfig(), results, false)
	if lines := strings.Split(b.String(), "\n"); len(lines) != 11 || !strings.HasPrefix(lines[4], "adaptive    ") {
		t.Errorf("plain table:\n%s", b.String())
	}
	b.Reset()
	if err := WriteChart(&b, DefaultConfig(), results); err != nil {
		t.Fatal(err)
	}
	// Two panels, three lines, and the fixed delay marked once.
	svg := b.String()
	if !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>\n") ||
		strings.Count(svg, "<polyline") != 3 || strings.Count(svg, "p95 of the model") != 1 ||
		!strings.Contains(svg, "Saturated: 40 callers") {
		t.Errorf("chart is not two panels of three lines in all:\n%s", svg)
	}
}
