package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadAndMedian: benchmark lines are grouped by name and variant, the
// GOMAXPROCS suffix dropped, other lines ignored, and medians taken per
// unit.
func TestReadAndMedian(t *testing.T) {
	in := `goos: linux
BenchmarkSuccessMem/bare-2     1000   400 ns/op   608 B/op   5 allocs/op
BenchmarkSuccessMem/retry-2    1000   900 ns/op  1088 B/op   7 allocs/op
BenchmarkSuccessMem/bare-2     1000   420 ns/op   608 B/op   5 allocs/op
BenchmarkSuccessMem/retry-2    1000   800 ns/op  1088 B/op   7 allocs/op
BenchmarkSuccessMem/bare-2     1000   410 ns/op   608 B/op   5 allocs/op
BenchmarkSuccessMem/retry-2    1000   850 ns/op  1088 B/op   7 allocs/op
BenchmarkLoop/retry-2          1000   10 ns/op   0.5 conns/op
PASS
`
	s := newSamples()
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"SuccessMem", "Loop"}, s.groups); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bare", "retry"}, s.variants["SuccessMem"]); diff != "" {
		t.Errorf("variants (-want +got):\n%s", diff)
	}
	if got := median(s.values[key{"SuccessMem", "retry", "ns/op"}]); got != 850 {
		t.Errorf("median retry ns/op = %v, want 850", got)
	}
	if got := median(s.values[key{"SuccessMem", "bare", "ns/op"}]); got != 410 {
		t.Errorf("median bare ns/op = %v, want 410", got)
	}
	if diff := cmp.Diff([]string{"conns/op"}, s.units); diff != "" {
		t.Errorf("extra units (-want +got):\n%s", diff)
	}
	lo, hi, n := pairedSpread([]float64{900, 800, 850}, []float64{400, 420, 410})
	if n != 3 || lo != 800.0/420 || hi != 900.0/400 {
		t.Errorf("pairedSpread = %v, %v, %d", lo, hi, n)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct{ in, group, variant string }{
		{"BenchmarkPeers/RetryMem/rehttp-2", "Peers/RetryMem", "rehttp"},
		{"BenchmarkDo/retry-16", "Do", "retry"},
		{"BenchmarkBudget", "Budget", ""},
		{"BenchmarkX/a-b", "X", "a-b"},
	}
	for _, tt := range tests {
		g, v := split(tt.in)
		if g != tt.group || v != tt.variant {
			t.Errorf("split(%q) = %q, %q; want %q, %q", tt.in, g, v, tt.group, tt.variant)
		}
	}
}
