package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDelays(t *testing.T) {
	t.Parallel()
	c := Config{Base: 100 * time.Millisecond, Cap: time.Second, Fixed: 700 * time.Millisecond}
	byName := map[string]Strategy{}
	for _, s := range Strategies() {
		byName[s.Name] = s
	}
	const ms = time.Millisecond
	tests := []struct {
		name     string
		strategy string
		rnd      float64
		prev     time.Duration
		attempts []int
		want     []time.Duration
	}{
		{name: "fixed ignores the attempt", strategy: "fixed, no jitter", rnd: 0.3,
			attempts: []int{1, 2, 10}, want: []time.Duration{700 * ms, 700 * ms, 700 * ms}},
		{name: "exponential doubles to the cap", strategy: "exponential, no jitter", rnd: 0,
			attempts: []int{1, 2, 3, 4, 5, 100}, want: []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms}},
		{name: "full jitter scales the bound", strategy: "full jitter", rnd: 0.5,
			attempts: []int{1, 3, 100}, want: []time.Duration{50 * ms, 200 * ms, 500 * ms}},
		{name: "full jitter can be zero", strategy: "full jitter", rnd: 0,
			attempts: []int{1, 100}, want: []time.Duration{0, 0}},
		{name: "equal jitter keeps half", strategy: "equal jitter", rnd: 0,
			attempts: []int{1, 3, 100}, want: []time.Duration{50 * ms, 200 * ms, 500 * ms}},
		{name: "equal jitter at the top", strategy: "equal jitter", rnd: 1,
			attempts: []int{1, 3, 100}, want: []time.Duration{100 * ms, 400 * ms, 1000 * ms}},
		{name: "decorrelated starts from base", strategy: "decorrelated jitter", rnd: 1,
			prev: 0, attempts: []int{1}, want: []time.Duration{300 * ms}},
		{name: "decorrelated grows from the previous wait", strategy: "decorrelated jitter", rnd: 0.5,
			prev: 300 * ms, attempts: []int{7}, want: []time.Duration{500 * ms}},
		{name: "decorrelated never below base", strategy: "decorrelated jitter", rnd: 0,
			prev: 900 * ms, attempts: []int{7}, want: []time.Duration{100 * ms}},
		{name: "decorrelated capped", strategy: "decorrelated jitter", rnd: 1,
			prev: 900 * ms, attempts: []int{7}, want: []time.Duration{time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := byName[tt.strategy]
			var got []time.Duration
			for _, a := range tt.attempts {
				got = append(got, s.Delay(c, a, tt.prev, func() float64 { return tt.rnd }))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s delays (-want +got):\n%s", tt.strategy, diff)
			}
		})
	}
}

func TestDecorrelatedSurvivesAHugeCap(t *testing.T) {
	t.Parallel()
	c := Config{Base: time.Second, Cap: time.Duration(1<<63 - 1)}
	prev := c.Cap / 2 // 3*prev overflows a Duration
	if got := decorrelatedDelay(c, 1, prev, func() float64 { return 1 }); got != c.Cap {
		t.Errorf("decorrelatedDelay = %s, want the cap %s", got, c.Cap)
	}
}
