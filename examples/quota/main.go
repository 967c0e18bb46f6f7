// Command quota simulates callers sharing one API key against a server
// that enforces rate limits and reports them in its response headers, under
// three strategies: no pacing, the AWS SDKs' adaptive mode, and pace.Pacer
// reading the headers, with the ideal first-come-first-served schedule for
// reference. The calls go through the real retry.Transport; time is
// virtual (testing/synctest), so an hour takes seconds.
//
//	go run .                       # the table, OpenAI's headers
//	go run . -format anthropic     # or github, ietf
//	go run . -svg quota.svg        # and a chart of the latencies
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quota:", err)
		os.Exit(2)
	}
	out := os.Stdout
	// synctest.Test needs a *testing.T, which only the testing package
	// makes: the simulation runs as the one test of testing.Main, whose own
	// report ("PASS") goes to /dev/null while the table goes to stdout.
	quota := func(t *testing.T) {
		var results []Result
		synctest.Test(t, func(*testing.T) {
			for _, s := range Strategies {
				results = append(results, Run(o.cfg, s))
			}
		})
		if err := report(out, o, results); err != nil {
			fmt.Fprintln(os.Stderr, "quota:", err)
			t.Fail() // testing.Main then exits with 1
		}
	}
	os.Args = os.Args[:1] // the testing package parses them too
	if null, err := os.Open(os.DevNull); err == nil {
		os.Stdout = null
	}
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "Quota", F: quota}}, nil, nil)
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
	fs := flag.NewFlagSet("quota", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.Format, "format", c.Format, "the server's headers: openai, anthropic, github or ietf")
	fs.IntVar(&c.Callers, "callers", c.Callers, "concurrent callers sharing the API key")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "simulated time during which callers start calls")
	fs.Float64Var(&c.RPM, "rpm", c.RPM, "requests allowed per minute")
	fs.Float64Var(&c.TPM, "tpm", c.TPM, "tokens allowed per minute (not with -format github)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the costs and service times")
	fs.BoolVar(&o.markdown, "markdown", false, "print the table as markdown")
	fs.StringVar(&o.svg, "svg", "", "write a chart of the latencies to this file; empty: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case !slices.Contains(Formats, c.Format):
		return o, fmt.Errorf("-format %q: want one of %v", c.Format, Formats)
	case c.Callers < 1 || c.Callers > 10000:
		return o, fmt.Errorf("-callers %d: want 1 to 10000", c.Callers)
	case c.Duration < time.Minute || c.Duration > 24*time.Hour:
		return o, fmt.Errorf("-duration %v: want a minute to a day", c.Duration)
	case c.RPM < 1 || c.TPM < float64(c.CostMax):
		return o, fmt.Errorf("-rpm %v -tpm %v: want at least 1 request and %d tokens", c.RPM, c.TPM, c.CostMax)
	}
	return o, nil
}

func report(out io.Writer, o options, results []Result) error {
	WriteTable(out, o.cfg, results, o.markdown)
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
