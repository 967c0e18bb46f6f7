// Command hedge simulates callers of an object store through the real
// retry.Transport, with and without hedging: against a store whose time
// to headers has a long tail of stragglers, where a hedge after the p95
// cuts the tail, and against a saturated server, where every attempt is
// slow because of load and a hedge only adds to it. It compares no
// hedging, a fixed delay, the adaptive delay (with and without a
// retry.Budget) and failsafe-go's hedgepolicy. Time is virtual
// (testing/synctest), so minutes take seconds.
//
//	go run .                  # the tables
//	go run . -markdown        # as markdown
//	go run . -svg hedge.svg   # and a chart of the latencies' tails
//	go run . -calls 100000 -callers 20 -seed 1
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"
	"testing/synctest"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hedge:", err)
		os.Exit(2)
	}
	out := os.Stdout
	// synctest.Test needs a *testing.T, which only the testing package
	// makes: the simulation runs as the one test of testing.Main, whose own
	// report ("PASS") goes to /dev/null while the table goes to stdout.
	hedge := func(t *testing.T) {
		var results []Result
		synctest.Test(t, func(*testing.T) {
			results = RunAll(o.cfg)
		})
		if err := report(out, o, results); err != nil {
			fmt.Fprintln(os.Stderr, "hedge:", err)
			t.Fail() // testing.Main then exits with 1
		}
	}
	os.Args = os.Args[:1] // the testing package parses them too
	if null, err := os.Open(os.DevNull); err == nil {
		os.Stdout = null
	}
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "Hedge", F: hedge}}, nil, nil)
}

// RunAll runs every row of both scenarios, in table order. Like Run, it
// belongs inside a testing/synctest bubble.
func RunAll(cfg Config) []Result {
	var results []Result
	for _, row := range TailRows {
		results = append(results, Run(cfg, ScenarioTail, row))
	}
	for _, row := range SaturatedRows {
		results = append(results, Run(cfg, ScenarioSaturated, row))
	}
	return results
}

// options are the parsed command line.
type options struct {
	cfg      Config
	markdown bool
	svg      string
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	o := options{cfg: DefaultConfig()}
	c := &o.cfg
	fs := flag.NewFlagSet("hedge", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&c.Tail.Calls, "calls", c.Tail.Calls, "calls in all against the store with a long tail, per row")
	fs.IntVar(&c.Tail.Callers, "callers", c.Tail.Callers, "callers of the store with a long tail, each making one call after another")
	fs.IntVar(&c.Saturated.Calls, "saturated-calls", c.Saturated.Calls, "calls in all against the saturated server, per row")
	fs.IntVar(&c.Saturated.Callers, "saturated-callers", c.Saturated.Callers, "callers of the saturated server")
	fs.IntVar(&c.C, "c", c.C, "requests the saturated server serves at a time")
	fs.Float64Var(&c.Spread, "spread", c.Spread, "the saturated server's service times are 20 ms × [1-spread, 1+spread]")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the servers' draws")
	fs.BoolVar(&o.markdown, "markdown", false, "print the tables as markdown")
	fs.StringVar(&o.svg, "svg", "", "write a chart of the latencies' tails to this file; empty: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !(c.Spread >= 0 && c.Spread < 1) {
		return o, fmt.Errorf("-spread %v: want 0 or more, below 1", c.Spread)
	}
	for _, f := range []struct {
		name   string
		v, top int
	}{
		{"-calls", c.Tail.Calls, 10_000_000}, {"-callers", c.Tail.Callers, 10_000},
		{"-saturated-calls", c.Saturated.Calls, 10_000_000}, {"-saturated-callers", c.Saturated.Callers, 10_000},
		{"-c", c.C, 10_000},
	} {
		if f.v < 1 || f.v > f.top {
			return o, fmt.Errorf("%s %d: want 1 to %d", f.name, f.v, f.top)
		}
	}
	return o, nil
}

func report(out io.Writer, o options, results []Result) error {
	WriteTable(out, o.cfg, results, o.markdown)
	writeTargets(out, results)
	if o.svg == "" {
		return nil
	}
	f, err := os.Create(o.svg)
	if err != nil {
		return err
	}
	if err := WriteChart(f, o.cfg, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeTargets prints the Budget's share over the saturated run and the
// targets missed (see Targets), or that none was.
func writeTargets(out io.Writer, results []Result) {
	find := func(scenario, row string) Result {
		for _, r := range results {
			if r.Scenario == scenario && r.Row == row {
				return r
			}
		}
		return Result{}
	}
	budget := find(ScenarioSaturated, RowBudget)
	fmt.Fprintf(out, "\nthe Budget's share of %d calls over %.1f s: %s\n", budget.Calls, budget.Length.Seconds(),
		pct(BudgetShare(budget.Calls, budget.Length)))
	missed := Targets(find(ScenarioTail, RowAdaptive), find(ScenarioSaturated, RowNone), budget)
	if len(missed) == 0 {
		fmt.Fprintln(out, "targets: all met")
		return
	}
	fmt.Fprintf(out, "targets missed:\n")
	for _, m := range missed {
		fmt.Fprintf(out, "- %s\n", m)
	}
}
