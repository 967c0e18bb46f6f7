package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestModel checks the default Model's quantiles, computed and drawn.
func TestModel(t *testing.T) {
	m := DefaultModel()
	if got := time.Duration(float64(m.Median) * ratio95(m.Sigma)); (got - 40*time.Millisecond).Abs() > time.Microsecond {
		t.Errorf("p95 of the lognormal part = %v, want 40ms", got)
	}
	tests := []struct {
		name string
		q    float64
		want time.Duration
	}{
		// The lognormal part holds 98% of the attempts: the q quantile is
		// its q/0.98 quantile, 20 ms × exp(sigma × Φ⁻¹(q/0.98)), below a
		// second, and 1 s + (q-0.98)/0.02 s above.
		{name: "median", q: 0.5, want: 20_217 * time.Microsecond},
		{name: "p95", q: 0.95, want: 44_016 * time.Microsecond},
		{name: "p99", q: 0.99, want: 1500 * time.Millisecond},
		{name: "p99.9", q: 0.999, want: 1950 * time.Millisecond},
	}
	const n = 400_000
	r := rand.New(rand.NewPCG(1, 2))
	drawn := make([]time.Duration, n)
	for i := range drawn {
		drawn[i] = m.Draw(r)
	}
	slices.Sort(drawn)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.Quantile(tt.q); (got - tt.want).Abs() > 5*time.Microsecond {
				t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
			if got := percentile(drawn, tt.q); math.Abs(float64(got)/float64(tt.want)-1) > 0.02 {
				t.Errorf("drawn quantile %v = %v, want %v within 2%%", tt.q, got, tt.want)
			}
		})
	}
	slow, _ := slices.BinarySearch(drawn, time.Second)
	if share := float64(n-slow) / n; math.Abs(share-m.Stragglers) > 0.002 {
		t.Errorf("%.4f of draws take a second or more, want %v", share, m.Stragglers)
	}
}
