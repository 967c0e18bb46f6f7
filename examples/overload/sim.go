package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// Config is one simulation: callers in a loop against a Server whose
// capacity changes from phase to phase.
type Config struct {
	Callers int           // each makes one call after another
	Phases  []Phase       // the server's capacity over the run; callers start calls until the last ends
	Service time.Duration // how long the server takes over an admitted request
	Refuse  time.Duration // how long it takes to answer a 529
	Warmup  time.Duration // the second refused share counts only attempts after it
	Seed    uint64        // of the retry delays' jitter
}

// DefaultConfig is the scenario of the README: 50 callers, a server that
// serves 10, then 20, then 5 requests at a time for 90 s each, 500 ms a
// request, and refuses in 10 ms.
func DefaultConfig() Config {
	return Config{Callers: 50, Phases: []Phase{{10, 90 * time.Second}, {20, 90 * time.Second}, {5, 90 * time.Second}},
		Service: 500 * time.Millisecond, Refuse: 10 * time.Millisecond, Warmup: 30 * time.Second, Seed: 1}
}

// Duration is the length of the run: the phases end to end.
func (c Config) Duration() time.Duration {
	var d time.Duration
	for _, p := range c.Phases {
		d += p.For
	}
	return d
}

// The strategies, one row each. Every one is the LLM recipe's
// retry.Transport; they differ in what they add to it.
const (
	StrategyNone     = "no limit"                // the recipe alone
	StrategyBudget   = "Budget"                  // one shared retry.Budget with the defaults
	StrategyOracle   = "semaphore (oracle)"      // an Oracle under the Transport
	StrategyFailsafe = "failsafe-go adaptive"    // an Adaptive under the Transport
	StrategyPacer    = "pace.Pacer"              // one shared pace.Pacer
	StrategyPacer4   = "pace.Pacer, 4 processes" // four Transports, each with its own pace.Pacer
)

// Strategies lists them in table order.
var Strategies = []string{StrategyNone, StrategyBudget, StrategyOracle, StrategyFailsafe, StrategyPacer, StrategyPacer4}

// processes is how many processes, each with its own Transport (and
// Pacer), the callers of StrategyPacer4 are split among.
const processes = 4

// The call every caller makes, again and again.
const (
	callURL  = "https://api.anthropic.example/v1/messages"
	callBody = `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"Hello"}]}`
)

// Run simulates cfg under strategy. It uses the time package for every
// wait, so it belongs inside a testing/synctest bubble, where minutes pass
// in a second or two.
func Run(cfg Config, strategy string) Result {
	srv := NewServer(cfg.Phases, cfg.Service, cfg.Refuse)
	trs := newTransports(cfg, strategy, srv)
	end := srv.End()
	var (
		mu        sync.Mutex // protects latencies and failed
		latencies []time.Duration
		failed    int
		wg        sync.WaitGroup
	)
	for i := range cfg.Callers {
		tr := trs[i%len(trs)] // 4 processes: 13, 13, 12 and 12 callers
		wg.Go(func() {
			for time.Now().Before(end) {
				began := time.Now()
				ok := call(tr)
				took := time.Since(began)
				mu.Lock()
				latencies = append(latencies, took)
				if !ok {
					failed++
				}
				mu.Unlock()
				if !ok && took < time.Second {
					// A call that failed at once is followed a second
					// later, as a real caller would, rather than spin.
					time.Sleep(time.Second)
				}
			}
		})
	}
	wg.Wait()
	attempts, services := srv.record()
	return measure(cfg, strategy, attempts, services, latencies, failed)
}

// newTransports returns the client side of strategy: one retry.Transport
// per process, with the LLM recipe's Policy and strategy's limit.
func newTransports(cfg Config, strategy string, srv *Server) []*retry.Transport {
	policy := retry.Policy{
		MaxAttempts:      5,
		AttemptTimeout:   2 * time.Minute, // a non-streamed answer sends its headers when it is complete
		Deadline:         5 * time.Minute,
		Retryable:        retry.LLMRetryable, // 529 included
		RetryAfterJitter: 0.1,
	}
	var base http.RoundTripper = srv
	switch strategy {
	case StrategyBudget:
		policy.Budget = &retry.Budget{} // one per service, with the defaults
	case StrategyOracle:
		base = NewOracle(srv)
	case StrategyFailsafe:
		base = NewAdaptive(srv)
	}
	n := 1
	if strategy == StrategyPacer4 {
		n = processes
	}
	trs := make([]*retry.Transport, n)
	for p := range trs {
		tr := &retry.Transport{Base: base, Policy: policy, Replayable: func(req *http.Request) bool {
			return strings.HasSuffix(req.URL.Path, "/v1/messages")
		}}
		tr.Policy.Rand = lockedRand(cfg.Seed, uint64(p))
		if strategy == StrategyPacer || strategy == StrategyPacer4 {
			tr.Pacer = &pace.Pacer{}
		}
		trs[p] = tr
	}
	return trs
}

// lockedRand returns a seeded source of jitter that the goroutines of one
// process may share.
func lockedRand(seed, stream uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, stream))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// call makes one call and reports whether it succeeded.
func call(tr http.RoundTripper) bool {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, callURL, strings.NewReader(callBody))
	req.Header.Set("X-Api-Key", "sk-ant-simulated")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// percentile returns the q quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// sortedCopy returns d sorted, leaving d as it was.
func sortedCopy(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
