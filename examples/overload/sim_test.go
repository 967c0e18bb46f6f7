package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// testConfig is the shortened run of the tests: the default scenario with
// phases of 60 s, which leave 30 s of steady state after the 30 s allowed
// for re-converging. Shorter phases weigh the start and each change more
// than the scenario does: at 40 s, the single process's goodput is 95.8%
// and the refused share after the warm-up up to 2.1%.
func testConfig() Config {
	cfg := DefaultConfig()
	for i := range cfg.Phases {
		cfg.Phases[i].For = 60 * time.Second
	}
	return cfg
}

func logResult(t *testing.T, r Result) {
	t.Helper()
	var settles []string
	for _, d := range r.Settle[1:] {
		settles = append(settles, settleText(d))
	}
	t.Logf("%-24s calls %5d failed %6s refused %6s (after warm-up %6s) goodput %5.1f%% p50 %v p99 %v settle %s",
		r.Strategy, r.Calls, pct(r.FailedShare()), pct(r.RefusedShare()), pct(r.LateRefusedShare()),
		100*r.Goodput, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), strings.Join(settles, ", "))
}

// TestTargets runs the shortened simulation and checks the targets that
// pace.Pacer must meet against a server that refuses with 529s (see
// Targets).
func TestTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		ours, oracle, four := Run(cfg, StrategyPacer), Run(cfg, StrategyOracle), Run(cfg, StrategyPacer4)
		for _, r := range []Result{ours, oracle, four} {
			logResult(t, r)
		}
		if missed := Targets(ours, oracle, four); len(missed) > 0 {
			t.Errorf("%d targets missed:\n\t%s", len(missed), strings.Join(missed, "\n\t"))
		}
	})
}

// TestPhysics checks that the rows that do not depend on pace.Pacer behave
// as the scenario says they must: the oracle keeps the server full and
// never meets a 529; the recipe alone fails many calls.
func TestPhysics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		oracle, none := Run(cfg, StrategyOracle), Run(cfg, StrategyNone)
		logResult(t, oracle)
		logResult(t, none)
		if oracle.Failed != 0 || oracle.Refused != 0 {
			t.Errorf("oracle: %d calls failed, %d attempts refused; want none", oracle.Failed, oracle.Refused)
		}
		if oracle.Goodput < 0.99 || oracle.Goodput > 1.01 {
			t.Errorf("oracle goodput %s of capacity, want 100%% within a point", pct(oracle.Goodput))
		}
		for i, d := range oracle.Settle {
			if d != 0 {
				t.Errorf("oracle settled %s into phase %d, want at once", settleText(d), i)
			}
		}
		if none.FailedShare() < 0.10 || none.RefusedShare() < 0.50 {
			t.Errorf("no limit: %s of calls failed and %s of attempts refused, want at least 10%% and 50%%",
				pct(none.FailedShare()), pct(none.RefusedShare()))
		}
		if none.Settle[1] != Never || none.Settle[2] != Never {
			t.Errorf("no limit settled after %v, want never", none.Settle[1:])
		}
	})
}

// TestSettle checks the rule of re-convergence on made-up seconds.
func TestSettle(t *testing.T) {
	full := second{attempts: 10, good: 10} // C = 10, all served
	refusing := second{attempts: 100, refused: 10, good: 10}
	idle := second{attempts: 10, good: 2}
	repeat := func(s second, n int) []second {
		out := make([]second, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := []struct {
		name string
		secs []second
		want time.Duration
	}{
		{name: "steady throughout", secs: repeat(full, 20), want: 0},
		{name: "refusing for 7 s", secs: append(repeat(refusing, 7), repeat(full, 13)...), want: 7 * time.Second},
		{name: "mostly idle for 3 s", secs: append(repeat(idle, 3), repeat(full, 17)...), want: 3 * time.Second},
		{name: "a relapse", secs: append(append(repeat(full, 10), refusing), repeat(full, 9)...), want: 11 * time.Second},
		{name: "refusing to the last window", secs: append(repeat(full, 15), repeat(refusing, 5)...), want: Never},
		{name: "2% refused is steady", secs: repeat(second{attempts: 50, refused: 1, good: 9.5}, 20), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := settle(tt.secs, []Phase{{10, time.Duration(len(tt.secs)) * time.Second}})
			if got[0] != tt.want {
				t.Errorf("settle = %s, want %s", settleText(got[0]), settleText(tt.want))
			}
		})
	}
}

// TestTargetsListsMisses checks Targets on made-up results.
func TestTargetsListsMisses(t *testing.T) {
	oracle := Result{Strategy: StrategyOracle, Calls: 1000, Attempts: 1000, LateAttempts: 900, Goodput: 1,
		P99: 5 * time.Second, Settle: []time.Duration{0, 0, 0}}
	good := Result{Strategy: StrategyPacer, Calls: 1000, Attempts: 1010, Refused: 10, LateAttempts: 900, LateRefused: 9,
		Goodput: 0.97, P99: 7 * time.Second, Settle: []time.Duration{5 * time.Second, 12 * time.Second, 30 * time.Second}}
	if missed := Targets(good, oracle, good); len(missed) != 0 {
		t.Errorf("Targets of a good row = %q, want none", missed)
	}
	bad := Result{Strategy: StrategyPacer, Calls: 1000, Failed: 2, Attempts: 1100, Refused: 100, LateAttempts: 1000,
		LateRefused: 30, Goodput: 0.9, P99: 8 * time.Second, Settle: []time.Duration{0, Never, 31 * time.Second}}
	four := Result{Strategy: StrategyPacer4, Calls: 1000, Failed: 100, LateAttempts: 1000, LateRefused: 100, Goodput: 0.8}
	missed := Targets(bad, oracle, four)
	for _, want := range []string{"failed 0.20% of calls", "3.00% of attempts refused", "goodput 90.00%",
		"p99 8s", "never after change 1", "31 s after change 2", "calls failed 10.00%", "refused after the warm-up 10.00%",
		"goodput 80.00%"} {
		if !strings.Contains(strings.Join(missed, "\n"), want) {
			t.Errorf("Targets does not say %q:\n%s", want, strings.Join(missed, "\n"))
		}
	}
	if len(missed) != 9 {
		t.Errorf("Targets listed %d misses, want 9:\n%s", len(missed), strings.Join(missed, "\n"))
	}
}
