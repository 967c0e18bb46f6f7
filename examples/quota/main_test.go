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
		{name: "format and duration", args: []string{"-format", "github", "-duration", "10m"},
			want: func() Config { c := DefaultConfig(); c.Format, c.Duration = "github", 10*time.Minute; return c }()},
		{name: "unknown format", args: []string{"-format", "stripe"}, wantErr: "-format"},
		{name: "no callers", args: []string{"-callers", "0"}, wantErr: "-callers"},
		{name: "too short", args: []string{"-duration", "1s"}, wantErr: "-duration"},
		{name: "token limit below one call", args: []string{"-tpm", "100"}, wantErr: "-tpm"},
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
		{Strategy: StrategyNone, Attempts: 400, Refused: 300, Failed: 7, Goodput: 0.9, P50: 3 * time.Second, P99: 9 * time.Second},
		{Strategy: StrategyPacer, Attempts: 100, Goodput: 0.995, P50: 6 * time.Second, P99: 8 * time.Second},
	}
	var b strings.Builder
	WriteTable(&b, DefaultConfig(), results, true)
	want := `openai headers, 50 callers, 1h0m0s, 600 requests and 1000000 tokens a minute

| strategy | attempts | refused | calls failed | goodput | p50 | p99 |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| no pacing | 400 | 75.00% | 7 | 90.0% | 3.0 s | 9.0 s |
| header pacing | 100 | 0.00% | 0 | 99.5% | 6.0 s | 8.0 s |
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	b.Reset()
	if err := WriteChart(&b, DefaultConfig(), results); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	if !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>\n") || strings.Count(svg, "<rect") != 4 {
		t.Errorf("chart is not an SVG of two bars per strategy:\n%s", svg)
	}
}
