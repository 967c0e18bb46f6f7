// Command herd simulates a thundering herd: many clients whose first
// request meets a service that is down, each retrying until it is served,
// under several backoff strategies side by side. Time is simulated, so
// nothing waits: the herd takes milliseconds, the AWS model a second or two.
//
//	go run .                  # the herd table
//	go run . -svg herd.svg    # the table, and the chart written to herd.svg
//	go run . -markdown        # the same table as markdown
//	go run . -model=aws       # the OCC contention model of the AWS post
//
// Clients retry without an attempt limit; a client still retrying at
// -horizon counts as never served. The budget strategy's clients also stop
// when the shared retry.Budget refuses a retry.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(2)
	}
}

// options are the parsed command line.
type options struct {
	model    string
	markdown bool
	svg      string
	chart    time.Duration
	herd     Config
	occ      OCCConfig
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("herd", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.model, "model", "herd", "herd: the outage herd; aws: the OCC contention model of the AWS post")
	fs.BoolVar(&o.markdown, "markdown", false, "print tables as markdown")
	fs.StringVar(&o.svg, "svg", "", "write the calls-per-tick chart to this file, in the format its extension names; empty: no chart")
	fs.DurationVar(&o.chart, "chart", 60*time.Second, "simulated time shown on the chart")
	h, d := &o.herd, DefaultConfig()
	fs.IntVar(&h.Clients, "clients", d.Clients, "clients, one request each")
	fs.DurationVar(&h.Arrive, "arrive", d.Arrive, "spread the first requests over this; 0: all at time zero")
	fs.IntVar(&h.Capacity, "capacity", d.Capacity, "calls served per tick once the service is up")
	fs.DurationVar(&h.Tick, "tick", d.Tick, "length of a tick")
	fs.DurationVar(&h.Down, "down", d.Down, "the service rejects every call sent before this")
	fs.DurationVar(&h.Base, "base", d.Base, "backoff bound of the first retry")
	fs.DurationVar(&h.Cap, "cap", d.Cap, "largest backoff")
	fs.DurationVar(&h.Fixed, "fixed", d.Fixed, "delay of the fixed strategy")
	fs.DurationVar(&h.Horizon, "horizon", d.Horizon, "clients still retrying then count as never served")
	fs.Uint64Var(&h.Seed, "seed", d.Seed, "random seed; equal seeds give equal results")
	fs.Float64Var(&h.Budget.Ratio, "budget-ratio", 0, "budget strategy: retries earned per first attempt; 0: the library default")
	fs.Float64Var(&h.Budget.MinPerSecond, "budget-min", 0, "budget strategy: retries always allowed per second; 0: the library default")
	fs.DurationVar(&h.Budget.Window, "budget-window", 0, "budget strategy: the budget's window; 0: the library default")
	clients := fs.String("aws-clients", joinInts(DefaultOCCConfig().Clients), "aws model: contention levels, comma-separated")
	runs := fs.Int("aws-runs", DefaultOCCConfig().Runs, "aws model: runs averaged per level")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.chart <= 0 {
		return o, errors.New("-chart must be positive")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	levels, err := parseInts(*clients)
	if err != nil {
		return o, err
	}
	o.occ = DefaultOCCConfig()
	o.occ.Clients, o.occ.Runs, o.occ.Seed = levels, *runs, h.Seed
	return o, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad contention level %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	switch o.model {
	case "herd":
		return runHerd(o, out)
	case "aws":
		return runAWS(o, out)
	}
	return errors.New(`-model must be "herd" or "aws"`)
}

// simulateAll runs every strategy against c.
func simulateAll(c Config) ([]Result, error) {
	var results []Result
	for _, s := range Strategies() {
		r, err := Simulate(c, s)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

func runHerd(o options, out io.Writer) error {
	c := o.herd
	results, err := simulateAll(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s clients, service down for %s, then %d calls per %s tick; backoff base %s, cap %s, fixed %s; seed %d\n\n",
		thousands(c.Clients), c.Down, c.Capacity, c.Tick, c.Base, c.Cap, c.Fixed, c.Seed)
	if err := herdTable(results).write(out, o.markdown); err != nil {
		return err
	}
	if o.svg == "" {
		return nil
	}
	if err := saveChart(o.svg, c, results, o.chart); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nchart: %s\n", o.svg)
	return nil
}

func runAWS(o options, out io.Writer) error {
	c := o.occ
	results, err := RunOCC(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "OCC contention (AWS post model): network |Normal(%s, %s)|, base %s, cap %s, mean of %d runs, seed %d\n\n",
		c.NetMean, c.NetSD, c.Base, c.Cap, c.Runs, c.Seed)
	calls, times := occTables(results)
	fmt.Fprintln(out, "calls (work):")
	if err := calls.write(out, o.markdown); err != nil {
		return err
	}
	fmt.Fprintln(out, "\ncompletion time:")
	return times.write(out, o.markdown)
}
