package main

import (
	"fmt"
	"math"
	"time"
)

// Result is one strategy's run.
type Result struct {
	Strategy string // one of Strategies
	Calls    int    // made by the callers
	Failed   int    // of them, ended without a 200

	// Attempts counts every request the server received, first attempts
	// and retries, those of calls still running at the end of the last
	// phase included; Refused counts those answered 529. LateAttempts and
	// LateRefused count the same after Config.Warmup.
	Attempts, Refused         int
	LateAttempts, LateRefused int

	// Goodput is the seconds of service of the requests answered 200,
	// within the run, over the integral of C over the run: the share of
	// the server's capacity that did useful work.
	Goodput float64

	P50, P99 time.Duration // call latency, failed calls included

	// Settle is, for each phase, the time from its start until the run
	// re-converged (see settle), or Never. Settle[0] is from the start of
	// the run; the others are after a change of C.
	Settle []time.Duration

	// InService is the mean number of requests in service at the server
	// in each second of the run, and RefusedPerSecond the attempts it
	// refused in each.
	InService        []float64
	RefusedPerSecond []int
}

// Never is a Settle of a phase that never re-converged.
const Never time.Duration = -1

// The rule of settle: a stretch of time is steady when, in every window
// of settleWindow seconds, at most maxRefusedShare of the attempts are
// refused and the successful service is at least minUse of C.
const (
	settleWindow    = 5
	maxRefusedShare = 0.02
	minUse          = 0.90
)

// FailedShare is Failed as a share of Calls.
func (r Result) FailedShare() float64 { return share(r.Failed, r.Calls) }

// RefusedShare is Refused as a share of Attempts.
func (r Result) RefusedShare() float64 { return share(r.Refused, r.Attempts) }

// LateRefusedShare is LateRefused as a share of LateAttempts.
func (r Result) LateRefusedShare() float64 { return share(r.LateRefused, r.LateAttempts) }

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// second is one second of the run, as the server saw it.
type second struct {
	attempts, refused int
	busy              float64 // seconds of service, of every admitted request
	good              float64 // seconds of service of requests answered 200
}

// measure makes the Result of a run from what the server recorded and the
// calls' latencies.
func measure(cfg Config, strategy string, attempts []attempt, services []service, latencies []time.Duration, failed int) Result {
	r := Result{Strategy: strategy, Calls: len(latencies), Failed: failed}
	secs := make([]second, int(cfg.Duration()/time.Second))
	for _, a := range attempts {
		r.Attempts++
		late := a.at >= cfg.Warmup
		if late {
			r.LateAttempts++
		}
		if a.refused {
			r.Refused++
			if late {
				r.LateRefused++
			}
		}
		if i := int(a.at / time.Second); i < len(secs) {
			secs[i].attempts++
			if a.refused {
				secs[i].refused++
			}
		}
	}
	var good, capacity float64
	for _, s := range services {
		for i := int(s.from / time.Second); i < len(secs) && time.Duration(i)*time.Second < s.to; i++ {
			lo, hi := time.Duration(i)*time.Second, time.Duration(i+1)*time.Second
			d := (min(hi, s.to) - max(lo, s.from)).Seconds()
			secs[i].busy += d
			if s.ok {
				secs[i].good += d
				good += d
			}
		}
	}
	for _, p := range cfg.Phases {
		capacity += float64(p.C) * p.For.Seconds()
	}
	r.Goodput = good / capacity
	sorted := sortedCopy(latencies)
	r.P50, r.P99 = percentile(sorted, 0.50), percentile(sorted, 0.99)
	r.Settle = settle(secs, cfg.Phases)
	r.InService, r.RefusedPerSecond = make([]float64, len(secs)), make([]int, len(secs))
	for i, s := range secs {
		r.InService[i], r.RefusedPerSecond[i] = s.busy, s.refused
	}
	return r
}

// settle returns, for each phase, how long after its start the run
// re-converged, or Never. The run has re-converged at the first whole
// second t of the phase from which every window of settleWindow seconds,
// [t, t+5 s), [t+5 s, t+10 s) and so on, up to the last that ends by the
// end of the phase, is steady: at most maxRefusedShare (2%) of the
// attempts that arrived in it refused, and the seconds of service of
// requests answered 200 in it at least minUse (90%) of C times its
// length. There must be at least one such window.
func settle(secs []second, phases []Phase) []time.Duration {
	out := make([]time.Duration, len(phases))
	from := 0
	for i, p := range phases {
		to := from + int(p.For/time.Second)
		out[i] = Never
		for t := from; t+settleWindow <= to; t++ {
			if steady(secs[t:to], p.C) {
				out[i] = time.Duration(t-from) * time.Second
				break
			}
		}
		from = to
	}
	return out
}

// steady reports whether every whole window of secs is steady under C.
func steady(secs []second, c int) bool {
	for w := 0; w+settleWindow <= len(secs); w += settleWindow {
		var attempts, refused int
		var good float64
		for _, s := range secs[w : w+settleWindow] {
			attempts += s.attempts
			refused += s.refused
			good += s.good
		}
		if float64(refused) > maxRefusedShare*float64(attempts) || good < minUse*float64(c*settleWindow) {
			return false
		}
	}
	return true
}

// The targets of Targets.
const (
	targetFailed    = 0.001 // calls failed, at most
	targetRefused   = 0.02  // attempts refused after the warm-up, at most
	targetGoodput   = 0.95  // of capacity, at least
	targetP99       = 1.5   // times the oracle's p99, at most
	targetSettle    = 30 * time.Second
	targetProcesses = 0.05 // the 4-process row's distance from the single-process row, at most
)

// Targets returns the targets that ours (the pace.Pacer row) misses, one
// sentence each, or none: at most 0.1% of calls failed; at most 2% of
// attempts refused after the warm-up; goodput at least 95% of capacity; a
// p99 at most 1.5 times the oracle's; re-converged within 30 s after each
// change of C; and the 4-process row (fourProcs) within 5 percentage
// points of ours on calls failed, attempts refused after the warm-up and
// goodput.
func Targets(ours, oracle, fourProcs Result) []string {
	var missed []string
	name := ours.Strategy
	if s := ours.FailedShare(); s > targetFailed {
		missed = append(missed, fmt.Sprintf("%s failed %s of calls, want at most %s", name, pct(s), pct(targetFailed)))
	}
	if s := ours.LateRefusedShare(); s > targetRefused {
		missed = append(missed, fmt.Sprintf("%s had %s of attempts refused after the warm-up, want at most %s", name, pct(s), pct(targetRefused)))
	}
	if ours.Goodput < targetGoodput {
		missed = append(missed, fmt.Sprintf("%s goodput %s of capacity, want at least %s", name, pct(ours.Goodput), pct(targetGoodput)))
	}
	if float64(ours.P99) > targetP99*float64(oracle.P99) {
		missed = append(missed, fmt.Sprintf("%s p99 %v, want at most %.1f x the oracle's %v", name, ours.P99, targetP99, oracle.P99))
	}
	for i := 1; i < len(ours.Settle); i++ {
		if d := ours.Settle[i]; d == Never || d > targetSettle {
			missed = append(missed, fmt.Sprintf("%s re-converged %s after change %d of C, want within %v", name, settleText(d), i, targetSettle))
		}
	}
	for _, m := range []struct {
		what      string
		one, four float64
	}{
		{"calls failed", ours.FailedShare(), fourProcs.FailedShare()},
		{"attempts refused after the warm-up", ours.LateRefusedShare(), fourProcs.LateRefusedShare()},
		{"goodput", ours.Goodput, fourProcs.Goodput},
	} {
		if math.Abs(m.four-m.one) > targetProcesses {
			missed = append(missed, fmt.Sprintf("%s: %s %s against %s for %s, want within %.0f points",
				fourProcs.Strategy, m.what, pct(m.four), pct(m.one), name, 100*targetProcesses))
		}
	}
	return missed
}

// pct formats a share as a percentage.
func pct(s float64) string { return fmt.Sprintf("%.2f%%", 100*s) }

// settleText formats a Settle.
func settleText(d time.Duration) string {
	if d == Never {
		return "never"
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}
