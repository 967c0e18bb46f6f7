package retrytest

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// FakeTime is a clock that moves only when someone sleeps on it. Plug its
// parts into a retry.Policy:
//
//	ft := retrytest.NewFakeTime()
//	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
//
// Every Sleep is recorded and advances Clock by its duration at once. Rand
// returns 1 unless SetRand says otherwise, so every backoff delay sits on its
// bound. A FakeTime is safe for concurrent use.
type FakeTime struct {
	// Clock is the fake clock that Sleep advances; a test may Advance it
	// too.
	Clock *clockwork.FakeClock

	mu     sync.Mutex // protects the fields below
	sleeps []time.Duration
	rand   func() float64
}

// NewFakeTime returns a FakeTime whose clock starts at a fixed instant and
// whose Rand returns 1.
func NewFakeTime() *FakeTime {
	return &FakeTime{Clock: clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

// Sleep records d and advances the clock by it without waiting. It returns
// ctx.Err() without sleeping if ctx is already done.
func (f *FakeTime) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.mu.Unlock()
	f.Clock.Advance(d)
	return nil
}

// Rand returns the jitter factor: 1, or what the function given to SetRand
// returns.
func (f *FakeTime) Rand() float64 {
	f.mu.Lock()
	r := f.rand
	f.mu.Unlock()
	if r == nil {
		return 1
	}
	return r()
}

// SetRand makes Rand return what r returns; nil restores the constant 1.
func (f *FakeTime) SetRand(r func() float64) {
	f.mu.Lock()
	f.rand = r
	f.mu.Unlock()
}

// Sleeps returns a copy of the durations slept so far, in order.
func (f *FakeTime) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// Slept returns the total time slept so far.
func (f *FakeTime) Slept() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var total time.Duration
	for _, d := range f.sleeps {
		total += d
	}
	return total
}
