package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff returns the delay before the attempt that follows attempt number
// attempt (counting from 1): full jitter, a random duration in
// [0, min(cap, base*2^(attempt-1))].
//
// rand returns the jitter factor; nil means [math/rand/v2.Float64]. Its values
// are clamped to [0, 1], and NaN counts as 1, so a broken source errs on the
// side of waiting longer. An attempt below 1 counts as 1. Backoff never
// overflows: for any large attempt the bound is cap. A base or cap of zero or
// less gives 0.
//
// Backoff is a pure function of its arguments and safe for concurrent use
// when rand is.
func Backoff(attempt int, base, cap time.Duration, rand func() float64) time.Duration {
	b := backoffBound(attempt, base, cap)
	if b <= 0 {
		return 0
	}
	return jitter(b, randFactor(rand))
}

// backoffBound is min(cap, base*2^(attempt-1)) without overflow.
func backoffBound(attempt int, base, cap time.Duration) time.Duration {
	if base <= 0 || cap <= 0 {
		return 0
	}
	if attempt < 1 {
		attempt = 1
	}
	shift := attempt - 1
	// base<<shift stays below cap exactly when base <= cap>>shift; a shift
	// of 63 or more leaves nothing of any positive duration.
	if shift >= 63 || base > cap>>shift {
		return cap
	}
	return base << shift
}

// randFactor draws from r (nil: math/rand/v2) and clamps to [0, 1].
func randFactor(r func() float64) float64 {
	var f float64
	if r == nil {
		f = rand.Float64()
	} else {
		f = r()
	}
	switch {
	case math.IsNaN(f) || f > 1:
		return 1
	case f < 0:
		return 0
	}
	return f
}

// jitter returns f*d for f in [0, 1], never above d: float64(d) rounds
// up near the top of the int64 range, and converting such a product back
// would overflow.
func jitter(d time.Duration, f float64) time.Duration {
	x := f * float64(d)
	if x >= float64(d) {
		return d
	}
	return time.Duration(x)
}
