// Command overload simulates callers of an LLM API whose server serves a
// fixed number of requests at a time and answers the rest with Anthropic's
// 529 overloaded_error, no Retry-After and no rate-limit headers, while
// that number changes under them. It compares the LLM recipe's
// retry.Transport alone, with a retry.Budget, with failsafe-go's adaptive
// concurrency limiter, and with pace.Pacer (in one process and in four),
// against a semaphore that knows the server's capacity. The calls go
// through the real retry.Transport; time is virtual (testing/synctest), so
// minutes take seconds.
//
//	go run .                     # the table
//	go run . -markdown           # as markdown
//	go run . -svg overload.svg   # and a chart of the requests in service
//	go run . -c 10,20,5 -phase 90s -callers 50
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(2)
	}
	out := os.Stdout
	// synctest.Test needs a *testing.T, which only the testing package
	// makes: the simulation runs as the one test of testing.Main, whose own
	// report ("PASS") goes to /dev/null while the table goes to stdout.
	overload := func(t *testing.T) {
		var results []Result
		synctest.Test(t, func(*testing.T) {
			for _, s := range Strategies {
				results = append(results, Run(o.cfg, s))
			}
		})
		if err := report(out, o, results); err != nil {
			fmt.Fprintln(os.Stderr, "overload:", err)
			t.Fail() // testing.Main then exits with 1
		}
	}
	os.Args = os.Args[:1] // the testing package parses them too
	if null, err := os.Open(os.DevNull); err == nil {
		os.Stdout = null
	}
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "Overload", F: overload}}, nil, nil)
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
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.SetOutput(errOut)
	caps := fs.String("c", capacities(c.Phases), "the server's capacity in each phase, comma-separated")
	phase := fs.Duration("phase", c.Phases[0].For, "length of each phase, in whole seconds")
	fs.IntVar(&c.Callers, "callers", c.Callers, "callers, each making one call after another")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the retry delays' jitter")
	fs.BoolVar(&o.markdown, "markdown", false, "print the table as markdown")
	fs.StringVar(&o.svg, "svg", "", "write a chart of the requests in service to this file; empty: none")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case c.Callers < 1 || c.Callers > 10000:
		return o, fmt.Errorf("-callers %d: want 1 to 10000", c.Callers)
	case *phase < 2*settleWindow*time.Second || *phase > time.Hour || *phase%time.Second != 0:
		return o, fmt.Errorf("-phase %v: want whole seconds from %v to an hour", *phase, 2*settleWindow*time.Second)
	}
	c.Phases = nil
	for f := range strings.SplitSeq(*caps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10000 {
			return o, fmt.Errorf("-c %q: want capacities of 1 to 10000, comma-separated", *caps)
		}
		c.Phases = append(c.Phases, Phase{C: n, For: *phase})
	}
	return o, nil
}

// capacities formats the phases' C for the -c flag.
func capacities(phases []Phase) string {
	cs := make([]string, len(phases))
	for i, p := range phases {
		cs[i] = strconv.Itoa(p.C)
	}
	return strings.Join(cs, ",")
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
