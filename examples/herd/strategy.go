package main

import (
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/retrykit/retry"
)

// Strategy is how a client waits between attempts.
type Strategy struct {
	Name string

	// Delay returns the wait after rejected attempt number attempt
	// (counting from 1). prev is the client's previous wait, zero before
	// the first retry; rnd draws from [0, 1).
	Delay func(c Config, attempt int, prev time.Duration, rnd func() float64) time.Duration

	// Budget, if not nil, makes the retry budget that all the clients of
	// one run share, measuring its window on clock.
	Budget func(bc BudgetConfig, clock clockwork.Clock) retryBudget
}

// retryBudget is the part of [retry.Budget] that a client uses.
type retryBudget interface {
	Deposit()
	Withdraw() bool
}

// Strategies returns the strategies compared, in table order.
func Strategies() []Strategy {
	return []Strategy{
		{Name: "fixed, no jitter", Delay: fixedDelay},
		{Name: "exponential, no jitter", Delay: exponentialDelay},
		{Name: "full jitter", Delay: fullJitterDelay},
		{Name: "equal jitter", Delay: equalJitterDelay},
		{Name: "decorrelated jitter", Delay: decorrelatedDelay},
		{Name: "full jitter + budget", Delay: fullJitterDelay, Budget: sharedBudget},
	}
}

// one is a jitter source that always draws the top of the range, which
// turns retry.Backoff into the plain capped exponential bound.
func one() float64 { return 1 }

func fixedDelay(c Config, _ int, _ time.Duration, _ func() float64) time.Duration {
	return c.Fixed
}

// exponentialDelay is min(Cap, Base*2^(attempt-1)), the same for every client.
func exponentialDelay(c Config, attempt int, _ time.Duration, _ func() float64) time.Duration {
	return retry.Backoff(attempt, c.Base, c.Cap, one)
}

// fullJitterDelay is the library's own backoff: uniform in
// [0, min(Cap, Base*2^(attempt-1))].
func fullJitterDelay(c Config, attempt int, _ time.Duration, rnd func() float64) time.Duration {
	return retry.Backoff(attempt, c.Base, c.Cap, rnd)
}

// equalJitterDelay keeps half of the exponential bound and jitters the
// other half: b/2 + uniform(0, b/2).
func equalJitterDelay(c Config, attempt int, _ time.Duration, rnd func() float64) time.Duration {
	b := retry.Backoff(attempt, c.Base, c.Cap, one)
	half := b / 2
	return half + time.Duration(rnd()*float64(b-half))
}

// decorrelatedDelay is min(Cap, uniform(Base, 3*prev)), starting from
// prev = Base: each wait grows from the last one rather than from the
// attempt number.
func decorrelatedDelay(c Config, _ int, prev time.Duration, rnd func() float64) time.Duration {
	prev = max(prev, c.Base)
	// In floating point, as 3*prev may not fit a Duration.
	d := float64(c.Base) + rnd()*(3*float64(prev)-float64(c.Base))
	if d >= float64(c.Cap) {
		return c.Cap
	}
	return time.Duration(d)
}

// sharedBudget is the retry.Budget that every client of a run shares.
func sharedBudget(bc BudgetConfig, clock clockwork.Clock) retryBudget {
	return &retry.Budget{Ratio: bc.Ratio, MinPerSecond: bc.MinPerSecond, Window: bc.Window, Clock: clock}
}
