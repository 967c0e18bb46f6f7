package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestThousands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   int
		want string
	}{
		{in: 0, want: "0"},
		{in: 999, want: "999"},
		{in: 1000, want: "1,000"},
		{in: 1234567, want: "1,234,567"},
		{in: -1234, want: "-1,234"},
		{in: -9223372036854775808, want: "-9,223,372,036,854,775,808"},
	}
	for _, tt := range tests {
		if got := thousands(tt.in); got != tt.want {
			t.Errorf("thousands(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHerdTable(t *testing.T) {
	t.Parallel()
	results := []Result{
		{Strategy: "fixed, no jitter", Calls: 25500, Rejected: 24500, Peak: 1000, Served: 1000, LastServed: 44 * time.Second},
		{Strategy: "full jitter + budget", Calls: 1200, Rejected: 1200, GaveUp: 999, Unserved: 1},
	}
	tests := []struct {
		name     string
		markdown bool
		want     string
	}{
		{name: "text", want: "" +
			"strategy               calls  peak/tick once up  rejected  last served  never served\n" +
			"fixed, no jitter      25,500              1,000     96.1%       44.0 s             0\n" +
			"full jitter + budget   1,200                  0    100.0%            -         1,000\n"},
		{name: "markdown", markdown: true, want: "" +
			"| strategy | calls | peak/tick once up | rejected | last served | never served |\n" +
			"| --- | ---: | ---: | ---: | ---: | ---: |\n" +
			"| fixed, no jitter | 25,500 | 1,000 | 96.1% | 44.0 s | 0 |\n" +
			"| full jitter + budget | 1,200 | 0 | 100.0% | - | 1,000 |\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			if err := herdTable(results).write(&b, tt.markdown); err != nil {
				t.Fatalf("write: %v", err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOCCTables(t *testing.T) {
	t.Parallel()
	results := []OCCResult{
		{Strategy: "a", Clients: 10, Calls: 12.4, Time: 1500 * time.Microsecond},
		{Strategy: "b", Clients: 10, Calls: 20, Time: 2 * time.Millisecond},
		{Strategy: "a", Clients: 20, Calls: 30.6, Time: 3 * time.Millisecond},
		{Strategy: "b", Clients: 20, Calls: 40, Time: 4 * time.Millisecond},
	}
	calls, times := occTables(results)
	wantCalls := table{header: []string{"clients", "a", "b"}, rows: [][]string{{"10", "12", "20"}, {"20", "31", "40"}}}
	wantTimes := table{header: []string{"clients", "a", "b"}, rows: [][]string{{"10", "2 ms", "2 ms"}, {"20", "3 ms", "4 ms"}}}
	opt := cmp.AllowUnexported(table{})
	if diff := cmp.Diff(wantCalls, calls, opt); diff != "" {
		t.Errorf("calls table (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTimes, times, opt); diff != "" {
		t.Errorf("times table (-want +got):\n%s", diff)
	}
}
