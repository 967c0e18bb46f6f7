package retry_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// maxDuration is the longest time.Duration.
const maxDuration = time.Duration(math.MaxInt64)

func constRand(f float64) func() float64 { return func() float64 { return f } }

func TestBackoff(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	one := constRand(1)
	tests := []struct {
		name      string
		attempt   int
		base, cap time.Duration
		rand      func() float64
		want      time.Duration
	}{
		{name: "first attempt", attempt: 1, base: 500 * ms, cap: 4 * time.Second, rand: one, want: 500 * ms},
		{name: "doubles", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: one, want: 2 * time.Second},
		{name: "capped", attempt: 5, base: 500 * ms, cap: 4 * time.Second, rand: one, want: 4 * time.Second},
		{name: "attempt 1000", attempt: 1000, base: 500 * ms, cap: 30 * time.Second, rand: one, want: 30 * time.Second},
		{name: "attempt MaxInt", attempt: math.MaxInt, base: 500 * ms, cap: 30 * time.Second, rand: one, want: 30 * time.Second},
		{name: "attempt 63", attempt: 63, base: 1, cap: maxDuration, rand: one, want: 1 << 62},
		{name: "attempt 64", attempt: 64, base: 1, cap: maxDuration, rand: one, want: maxDuration},
		{name: "attempt 65", attempt: 65, base: 1, cap: maxDuration, rand: one, want: maxDuration},
		{name: "attempt 63 with base 2", attempt: 63, base: 2, cap: maxDuration, rand: one, want: maxDuration},
		{name: "attempt 34 of 1s", attempt: 34, base: time.Second, cap: maxDuration, rand: one, want: time.Second << 33},
		{name: "attempt 35 of 1s", attempt: 35, base: time.Second, cap: maxDuration, rand: one, want: maxDuration},
		{name: "attempt 0 counts as 1", attempt: 0, base: 500 * ms, cap: 4 * time.Second, rand: one, want: 500 * ms},
		{name: "negative attempt", attempt: -5, base: 500 * ms, cap: 4 * time.Second, rand: one, want: 500 * ms},
		{name: "attempt MinInt", attempt: math.MinInt, base: 500 * ms, cap: 4 * time.Second, rand: one, want: 500 * ms},
		{name: "base above cap", attempt: 1, base: 10 * time.Second, cap: 4 * time.Second, rand: one, want: 4 * time.Second},
		{name: "huge base and cap", attempt: 1, base: maxDuration, cap: maxDuration, rand: one, want: maxDuration},
		{name: "huge base, attempt 2", attempt: 2, base: maxDuration, cap: maxDuration, rand: one, want: maxDuration},
		{
			name: "just under 1 of the largest bound", attempt: 1, base: maxDuration, cap: maxDuration,
			rand: constRand(math.Nextafter(1, 0)), want: maxDuration - 1023,
		},
		{name: "half", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(0.5), want: time.Second},
		{name: "zero factor", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(0), want: 0},
		{name: "factor above 1", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(1.5), want: 2 * time.Second},
		{name: "negative factor", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(-0.5), want: 0},
		{name: "NaN counts as 1", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(math.NaN()), want: 2 * time.Second},
		{name: "+Inf", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(math.Inf(1)), want: 2 * time.Second},
		{name: "-Inf", attempt: 3, base: 500 * ms, cap: 4 * time.Second, rand: constRand(math.Inf(-1)), want: 0},
		{name: "zero base", attempt: 3, base: 0, cap: 4 * time.Second, rand: one, want: 0},
		{name: "zero cap", attempt: 3, base: 500 * ms, cap: 0, rand: one, want: 0},
		{name: "negative base", attempt: 3, base: -500 * ms, cap: 4 * time.Second, rand: one, want: 0},
		{name: "negative cap", attempt: 3, base: 500 * ms, cap: -4 * time.Second, rand: one, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retry.Backoff(tt.attempt, tt.base, tt.cap, tt.rand); got != tt.want {
				t.Errorf("Backoff(%d, %v, %v) = %v, want %v", tt.attempt, tt.base, tt.cap, got, tt.want)
			}
		})
	}
}

func TestBackoffDefaultRand(t *testing.T) {
	t.Parallel()
	const bound = 4 * time.Second
	seen := make(map[time.Duration]bool)
	for range 100 {
		d := retry.Backoff(10, time.Second, bound, nil)
		if d < 0 || d > bound {
			t.Fatalf("Backoff(nil rand) = %v, want within [0, %v]", d, bound)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 draws gave %d distinct delays, want jitter", len(seen))
	}
}

// TestDoBackoff runs eight failing attempts: seven sleeps, none after the
// last attempt.
func TestDoBackoff(t *testing.T) {
	t.Parallel()
	s := time.Second
	bounds := []time.Duration{s / 2, s, 2 * s, 4 * s, 4 * s, 4 * s, 4 * s}
	p := retry.Policy{Base: s / 2, Cap: 4 * s, MaxAttempts: 8}

	t.Run("on the bound", func(t *testing.T) {
		t.Parallel()
		ft := retrytest.NewFakeTime()
		sc := &loopScript{errs: statusErrs(9, 503)}
		_, err := retry.Do(t.Context(), withFakeTime(p, ft), sc.fn)
		re := checkGaveUp(t, err, retry.ReasonMaxAttempts, 8)
		if errors.Unwrap(re) != sc.errs[7] {
			t.Errorf("Unwrap = %v, want the 8th attempt's error", errors.Unwrap(re))
		}
		checkCalls(t, sc, 8)
		checkSleeps(t, ft, bounds...)
	})
	t.Run("jittered", func(t *testing.T) {
		t.Parallel()
		ft := retrytest.NewFakeTime()
		ft.SetRand(rand.New(rand.NewPCG(7, 7)).Float64)
		sc := &loopScript{errs: statusErrs(9, 503)}
		_, err := retry.Do(t.Context(), withFakeTime(p, ft), sc.fn)
		checkGaveUp(t, err, retry.ReasonMaxAttempts, 8)
		got := ft.Sleeps()
		if len(got) != len(bounds) {
			t.Fatalf("sleeps = %v, want %d of them", got, len(bounds))
		}
		distinct := make(map[time.Duration]bool)
		for i, d := range got {
			if d < 0 || d > bounds[i] {
				t.Errorf("sleep %d = %v, want within [0, %v]", i+1, d, bounds[i])
			}
			distinct[d] = true
		}
		if len(distinct) != len(got) {
			t.Errorf("sleeps = %v, want all different", got)
		}
	})
}

func TestDoClampsRand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rand float64
		want time.Duration
	}{
		{name: "above 1", rand: 7, want: 500 * time.Millisecond},
		{name: "NaN", rand: math.NaN(), want: 500 * time.Millisecond},
		{name: "+Inf", rand: math.Inf(1), want: 500 * time.Millisecond},
		{name: "below 0", rand: -3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			ft.SetRand(constRand(tt.rand))
			sc := &loopScript{errs: []error{statusErr(503)}}
			if _, err := retry.Do(t.Context(), withFakeTime(retry.Policy{}, ft), sc.fn); err != nil {
				t.Fatalf("Do: %v", err)
			}
			checkSleeps(t, ft, tt.want)
		})
	}
}

// startDo runs Do in a goroutine; the channel receives its error.
func startDo(ctx context.Context, p retry.Policy, sc *loopScript) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := retry.Do(ctx, p, sc.fn)
		done <- err
	}()
	return done
}

// waitDone returns Do's error, failing the test if it takes seconds.
func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		t.Fatal("Do did not return")
		return nil
	}
}

// TestDoDefaultSleep checks the sleep Do uses when Policy.Sleep is nil: it
// waits on Policy.Clock and returns early when the caller gives up.
func TestDoDefaultSleep(t *testing.T) {
	t.Parallel()
	t.Run("waits on the clock", func(t *testing.T) {
		t.Parallel()
		clock := clockwork.NewFakeClock()
		sc := &loopScript{errs: []error{statusErr(503)}}
		done := startDo(t.Context(), retry.Policy{Clock: clock, Rand: constRand(1)}, sc)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("Do never slept on the clock: %v", err)
		}
		clock.Advance(499 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Do returned %v before the 500ms delay had passed", err)
		default:
		}
		clock.Advance(time.Millisecond)
		if err := waitDone(t, done); err != nil {
			t.Errorf("Do: %v", err)
		}
		checkCalls(t, sc, 2)
	})
	t.Run("returns early on cancel", func(t *testing.T) {
		t.Parallel()
		clock := clockwork.NewFakeClock()
		first := statusErr(503)
		sc := &loopScript{errs: []error{first}}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := startDo(ctx, retry.Policy{Clock: clock, Rand: constRand(1)}, sc)
		if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatalf("Do never slept on the clock: %v", err)
		}
		cancel()
		err := waitDone(t, done)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if se, ok := errors.AsType[*retry.StatusError](err); !ok || se != first {
			t.Errorf("errors.As(*StatusError) = %v, %v; want the attempt's", se, ok)
		}
		checkCalls(t, sc, 1)
	})
	t.Run("zero delay does not wait", func(t *testing.T) {
		t.Parallel()
		clock := clockwork.NewFakeClock()
		sc := &loopScript{errs: []error{statusErr(503)}}
		done := startDo(t.Context(), retry.Policy{Clock: clock, Rand: constRand(0)}, sc)
		if err := waitDone(t, done); err != nil {
			t.Errorf("Do: %v", err)
		}
	})
	t.Run("real clock", func(t *testing.T) {
		t.Parallel()
		sc := &loopScript{errs: []error{statusErr(503)}}
		start := time.Now()
		done := startDo(t.Context(), retry.Policy{Base: 2 * time.Millisecond, Rand: constRand(1)}, sc)
		if err := waitDone(t, done); err != nil {
			t.Errorf("Do: %v", err)
		}
		if elapsed := time.Since(start); elapsed < 2*time.Millisecond {
			t.Errorf("Do returned after %v, want a sleep of 2ms", elapsed)
		}
	})
}
