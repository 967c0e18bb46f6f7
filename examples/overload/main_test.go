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
		{name: "capacities and phase", args: []string{"-c", "4, 8", "-phase", "1m", "-callers", "20"},
			want: func() Config {
				c := DefaultConfig()
				c.Callers, c.Phases = 20, []Phase{{4, time.Minute}, {8, time.Minute}}
				return c
			}()},
		{name: "no callers", args: []string{"-callers", "0"}, wantErr: "-callers"},
		{name: "phase too short", args: []string{"-phase", "5s"}, wantErr: "-phase"},
		{name: "phase not whole seconds", args: []string{"-phase", "30500ms"}, wantErr: "-phase"},
		{name: "capacity not a number", args: []string{"-c", "10,x"}, wantErr: "-c"},
		{name: "capacity zero", args: []string{"-c", "10,0"}, wantErr: "-c"},
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
	results := []Result{
		{Strategy: StrategyNone, Calls: 1000, Failed: 300, Attempts: 4000, Refused: 2800, LateAttempts: 3000, LateRefused: 2000,
			Goodput: 0.995, P50: 500 * time.Millisecond, P99: 6100 * time.Millisecond,
			Settle: []time.Duration{Never, Never, Never}, InService: []float64{10, 10}, RefusedPerSecond: []int{30, 40}},
		{Strategy: StrategyOracle, Calls: 700, Attempts: 700, LateAttempts: 600, Goodput: 1,
			P50: 1500 * time.Millisecond, P99: 5 * time.Second,
			Settle: []time.Duration{0, 0, 2 * time.Second}, InService: []float64{10, 9.5}, RefusedPerSecond: []int{0, 0}},
	}
	var b strings.Builder
	WriteTable(&b, DefaultConfig(), results, true)
	want := `50 callers, C 10 → 20 → 5, 90 s a phase, 500 ms a request

| strategy | calls | failed | refused | refused after 30 s | goodput | p50 | p99 | settle 10→20 | settle 20→5 |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| no limit | 1000 | 30.00% | 70.00% | 66.67% | 99.5% | 0.5 s | 6.1 s | never | never |
| semaphore (oracle) | 700 | 0.00% | 0.00% | 0.00% | 100.0% | 1.5 s | 5.0 s | 0 s | 2 s |
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	b.Reset()
	WriteTable(&b, DefaultConfig(), results, false)
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[4], "semaphore (oracle)  ") {
		t.Errorf("plain table:\n%s", b.String())
	}
	b.Reset()
	if err := WriteChart(&b, DefaultConfig(), results); err != nil {
		t.Fatal(err)
	}
	// Only the oracle is charted here: one panel, its C path and its
	// line, and no bar in its strip.
	svg := b.String()
	if !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>\n") ||
		strings.Count(svg, "<polyline") != 1 || strings.Count(svg, "<path") != 1 || strings.Contains(svg, StrategyNone) {
		t.Errorf("chart is not one panel for the oracle:\n%s", svg)
	}
}
