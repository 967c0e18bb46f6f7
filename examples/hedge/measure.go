package main

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/retrykit/retry"
)

// Result is one row's run.
type Result struct {
	Scenario string // ScenarioTail or ScenarioSaturated
	Row      string // one of the scenario's rows
	Calls    int    // made by the callers
	Failed   int    // of them, ended without a 200

	// Attempts counts every request the server received, first attempts
	// and hedges (and retries, were there any failures); Hedges counts the
	// hedges, as the Transport (or failsafe-go) reported them.
	Attempts, Hedges int

	// Open is the response bodies the server handed out that were still
	// open at the end of the run, 10 s after the last call ended.
	Open int

	// Abandoned is, for the Queue, the requests whose client had gone
	// before their answer, which it served all the same; zero for the
	// Store, which stops at once.
	Abandoned int

	// Length is the run's length, from the first call's start to the
	// last one's end.
	Length time.Duration

	// P50, P99 and P999 are quantiles of the calls' time to headers: from
	// the start of the call until RoundTrip returned.
	P50, P99, P999 time.Duration

	// Latencies are the calls' times to headers, sorted.
	Latencies []time.Duration
}

// Extra is the attempts beyond one a call, as a share of the calls.
func (r Result) Extra() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Attempts)/float64(r.Calls) - 1
}

// setLatencies sets Latencies and the quantiles from the calls' times to
// headers, which it sorts.
func (r *Result) setLatencies(d []time.Duration) {
	slices.Sort(d)
	r.Latencies = d
	r.P50, r.P99, r.P999 = percentile(d, 0.50), percentile(d, 0.99), percentile(d, 0.999)
}

// percentile returns the q quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// The targets of Targets.
const (
	targetTailP99   = 100 * time.Millisecond // the adaptive row's p99 in the long tail, at most
	targetTailExtra = 0.06                   // its extra attempts, at most
	targetSatP99    = 1.10                   // the Budget row's p99 when saturated, times no hedging's, at most
)

// BudgetShare is the most a default retry.Budget lets hedges and retries
// add, as a share of the calls, to a run of calls over length. In the last
// Window (10 s), it allows DefaultBudgetRatio (a tenth) of the first
// attempts plus DefaultBudgetMinPerSecond × Window (100). The Budget's
// window starts with the run, so the run is cut into windows of 10 s, the
// last one, however short, allowing its 100 too.
func BudgetShare(calls int, length time.Duration) float64 {
	if calls == 0 {
		return 0
	}
	windows := math.Ceil(float64(length) / float64(retry.DefaultBudgetWindow))
	floor := retry.DefaultBudgetMinPerSecond * retry.DefaultBudgetWindow.Seconds() * windows
	return retry.DefaultBudgetRatio + floor/float64(calls)
}

// Targets returns the targets missed, one sentence each, or none. In the
// long tail, adaptive hedging has a p99 of at most 100 ms and at most 6%
// extra attempts. Saturated, adaptive hedging with a Budget adds at most
// the Budget's share of attempts (BudgetShare), and its p99 is at most
// 10% above no hedging's.
func Targets(adaptive, satNone, satBudget Result) []string {
	var missed []string
	if adaptive.P99 > targetTailP99 {
		missed = append(missed, fmt.Sprintf("%s, %s: p99 %s, want at most %s",
			adaptive.Scenario, adaptive.Row, msText(adaptive.P99), msText(targetTailP99)))
	}
	if e := adaptive.Extra(); e > targetTailExtra {
		missed = append(missed, fmt.Sprintf("%s, %s: %s extra attempts, want at most %s",
			adaptive.Scenario, adaptive.Row, pct(e), pct(targetTailExtra)))
	}
	if e, share := satBudget.Extra(), BudgetShare(satBudget.Calls, satBudget.Length); e > share {
		missed = append(missed, fmt.Sprintf("%s, %s: %s extra attempts, want at most the Budget's %s",
			satBudget.Scenario, satBudget.Row, pct(e), pct(share)))
	}
	if float64(satBudget.P99) > targetSatP99*float64(satNone.P99) {
		missed = append(missed, fmt.Sprintf("%s, %s: p99 %s, want at most %.2f × no hedging's %s",
			satBudget.Scenario, satBudget.Row, msText(satBudget.P99), targetSatP99, msText(satNone.P99)))
	}
	return missed
}

// pct formats a share as a percentage.
func pct(s float64) string { return fmt.Sprintf("%.2f%%", 100*s) }
