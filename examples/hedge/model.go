package main

import (
	"math"
	"math/rand/v2"
	"time"
)

// Model is the time the store takes to send an attempt's response headers:
// most attempts are lognormal, and a few stragglers, drawn at random
// whatever the load, take a second or two (a pause, a cold cache, a slow
// replica). It is the tail that hedging is meant for.
//
// The zero Model is not useful; DefaultModel returns the README's. A Model
// is a plain value, safe to share.
type Model struct {
	// Median of the lognormal part, and Sigma, the standard deviation of
	// its logarithm.
	Median time.Duration
	Sigma  float64

	// Stragglers is the share of attempts that straggle, each taking a
	// time drawn uniformly from [StragglerMin, StragglerMax).
	Stragglers                 float64
	StragglerMin, StragglerMax time.Duration
}

// z95 is the 0.95 quantile of the standard normal distribution.
const z95 = 1.6448536269514722

// DefaultModel is the README's: a median of 20 ms, a sigma of ln 2 / z95
// (0.4214) so that the p95 of the lognormal part is twice the median,
// 40 ms, and 2% of stragglers taking 1 to 2 s.
func DefaultModel() Model {
	return Model{Median: 20 * time.Millisecond, Sigma: math.Ln2 / z95,
		Stragglers: 0.02, StragglerMin: time.Second, StragglerMax: 2 * time.Second}
}

// Draw returns one attempt's time to headers, drawn from r.
func (m Model) Draw(r *rand.Rand) time.Duration {
	if r.Float64() < m.Stragglers {
		return m.StragglerMin + time.Duration(r.Int64N(int64(m.StragglerMax-m.StragglerMin)))
	}
	return time.Duration(float64(m.Median) * math.Exp(m.Sigma*r.NormFloat64()))
}

// CDF returns the share of attempts whose time to headers is at most d.
func (m Model) CDF(d time.Duration) float64 {
	var lognormal float64
	if d > 0 {
		z := math.Log(float64(d)/float64(m.Median)) / m.Sigma
		lognormal = 0.5 * math.Erfc(-z/math.Sqrt2)
	}
	straggled := 0.0
	switch {
	case d >= m.StragglerMax:
		straggled = 1
	case d > m.StragglerMin:
		straggled = float64(d-m.StragglerMin) / float64(m.StragglerMax-m.StragglerMin)
	}
	return (1-m.Stragglers)*lognormal + m.Stragglers*straggled
}

// Quantile returns the q quantile of the time to headers, stragglers
// included, to the microsecond: the least d with CDF(d) >= q. q must be
// in (0, 1).
func (m Model) Quantile(q float64) time.Duration {
	lo, hi := time.Duration(0), max(m.StragglerMax, time.Duration(float64(m.Median)*math.Exp(10*m.Sigma)))
	for hi-lo > time.Microsecond {
		mid := lo + (hi-lo)/2
		if m.CDF(mid) >= q {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi.Round(time.Microsecond)
}

// ratio95 is the p95 of a lognormal over its median, for sigma.
func ratio95(sigma float64) float64 { return math.Exp(z95 * sigma) }
