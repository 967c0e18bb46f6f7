package main

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// testConfig is the shortened run of the tests: the default scenarios
// with 20,000 calls against the store (still 200 calls beyond its p99
// and 20 beyond its p99.9) and 12,000 against the saturated server (30 s,
// three windows of the Budget).
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Tail.Calls, cfg.Saturated.Calls = 20_000, 12_000
	return cfg
}

// testRun runs every row of testConfig once, for every test that needs
// them, in the bubble of the first.
var testRun struct {
	once    sync.Once
	results []Result
}

func testResults(t *testing.T) []Result {
	t.Helper()
	testRun.once.Do(func() {
		synctest.Test(t, func(*testing.T) { testRun.results = RunAll(testConfig()) })
	})
	if len(testRun.results) == 0 {
		t.Fatal("the shortened run made no results")
	}
	return testRun.results
}

// find returns the result of row in scenario.
func find(t *testing.T, results []Result, scenario, row string) Result {
	t.Helper()
	for _, r := range results {
		if r.Scenario == scenario && r.Row == row {
			return r
		}
	}
	t.Fatalf("no result for %s, %s", scenario, row)
	return Result{}
}

func logResult(t *testing.T, r Result) {
	t.Helper()
	t.Logf("%-9s %-23s calls %6d failed %d attempts %6d hedges %5d (%s extra) abandoned %5d open %d p50 %v p99 %v p99.9 %v in %v",
		r.Scenario, r.Row, r.Calls, r.Failed, r.Attempts, r.Hedges, pct(r.Extra()), r.Abandoned, r.Open,
		r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond), r.P999.Round(100*time.Microsecond),
		r.Length.Round(time.Millisecond))
}

// TestTargets checks the targets (see Targets) on the shortened run.
func TestTargets(t *testing.T) {
	results := testResults(t)
	adaptive := find(t, results, ScenarioTail, RowAdaptive)
	none, budget := find(t, results, ScenarioSaturated, RowNone), find(t, results, ScenarioSaturated, RowBudget)
	for _, r := range []Result{adaptive, none, budget} {
		logResult(t, r)
	}
	t.Logf("the Budget's share over %v: %s", budget.Length.Round(time.Millisecond), pct(BudgetShare(budget.Calls, budget.Length)))
	if missed := Targets(adaptive, none, budget); len(missed) > 0 {
		t.Errorf("%d targets missed:\n\t%s", len(missed), strings.Join(missed, "\n\t"))
	}
}

// TestNoBodyLeft checks that every row of the shortened run ends with
// every response body closed, every call answered 200, and every hedge
// counted: the attempts beyond one a call are the hedges.
func TestNoBodyLeft(t *testing.T) {
	for _, r := range testResults(t) {
		logResult(t, r)
		if r.Open != 0 {
			t.Errorf("%s, %s: %d bodies left open, want none", r.Scenario, r.Row, r.Open)
		}
		if r.Failed != 0 {
			t.Errorf("%s, %s: %d calls failed, want none", r.Scenario, r.Row, r.Failed)
		}
		if r.Attempts != r.Calls+r.Hedges {
			t.Errorf("%s, %s: %d attempts for %d calls and %d hedges, want one each", r.Scenario, r.Row, r.Attempts, r.Calls, r.Hedges)
		}
	}
}

// TestPhysics checks the rows that do not depend on the library's
// hedging: without it, the store's p99 is a straggler's (the model's,
// 1.5 s, within 10%), and the saturated server's time to headers is the
// wait behind the other callers, 40/8 × 20 ms; failsafe-go hedges at
// the model's p95, about 5% of calls.
func TestPhysics(t *testing.T) {
	results := testResults(t)
	none := find(t, results, ScenarioTail, RowNone)
	if d := none.P99 - 1500*time.Millisecond; d.Abs() > 150*time.Millisecond {
		t.Errorf("no hedging: p99 %v, want 1.5s within 10%%", none.P99)
	}
	if none.Hedges != 0 || none.Attempts != none.Calls {
		t.Errorf("no hedging: %d attempts and %d hedges for %d calls, want one attempt each", none.Attempts, none.Hedges, none.Calls)
	}
	sat := find(t, results, ScenarioSaturated, RowNone)
	if d := sat.P50 - 100*time.Millisecond; d.Abs() > 5*time.Millisecond {
		t.Errorf("saturated, no hedging: p50 %v, want 100ms within 5ms", sat.P50)
	}
	fs := find(t, results, ScenarioTail, RowFailsafe)
	if e := fs.Extra(); e < 0.04 || e > 0.06 {
		t.Errorf("failsafe-go: %s extra attempts, want 4%% to 6%%", pct(e))
	}
}

// TestTargetsListsMisses checks Targets on made-up results.
func TestTargetsListsMisses(t *testing.T) {
	good := Result{Scenario: ScenarioTail, Row: RowAdaptive, Calls: 1000, Attempts: 1050, P99: 70 * time.Millisecond}
	none := Result{Scenario: ScenarioSaturated, Row: RowNone, Calls: 1000, Attempts: 1000, P99: 100 * time.Millisecond}
	budgeted := Result{Scenario: ScenarioSaturated, Row: RowBudget, Calls: 10000, Attempts: 11250,
		Length: 25 * time.Second, P99: 110 * time.Millisecond} // a share of 10% + 3 windows × 100 / 10000
	if missed := Targets(good, none, budgeted); len(missed) != 0 {
		t.Errorf("Targets of good rows = %q, want none", missed)
	}
	bad := Result{Scenario: ScenarioTail, Row: RowAdaptive, Calls: 1000, Attempts: 1070, P99: 101 * time.Millisecond}
	over := Result{Scenario: ScenarioSaturated, Row: RowBudget, Calls: 10000, Attempts: 11350,
		Length: 25 * time.Second, P99: 111 * time.Millisecond}
	missed := Targets(bad, none, over)
	for _, want := range []string{"p99 101.0 ms, want at most 100.0 ms", "7.00% extra attempts, want at most 6.00%",
		"13.50% extra attempts, want at most the Budget's 13.00%", "p99 111.0 ms, want at most 1.10 × no hedging's 100.0 ms"} {
		if !strings.Contains(strings.Join(missed, "\n"), want) {
			t.Errorf("Targets does not say %q:\n%s", want, strings.Join(missed, "\n"))
		}
	}
	if len(missed) != 4 {
		t.Errorf("Targets listed %d misses, want 4:\n%s", len(missed), strings.Join(missed, "\n"))
	}
}
