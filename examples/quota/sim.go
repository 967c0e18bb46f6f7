package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// Config is one simulation: callers sharing one API key against a Server.
type Config struct {
	Format   string
	Callers  int
	Duration time.Duration // callers start calls until then
	RPM, TPM float64
	CostMin  int // tokens a call uses, drawn uniformly
	CostMax  int
	Seed     uint64
}

// DefaultConfig is the scenario of the guide: 50 callers, 600 requests and
// 1,000,000 tokens a minute, calls of 500 to 4,000 tokens, an hour.
func DefaultConfig() Config {
	return Config{Format: "openai", Callers: 50, Duration: time.Hour, RPM: 600, TPM: 1e6,
		CostMin: 500, CostMax: 4000, Seed: 1}
}

// The strategies, one row each.
const (
	StrategyNone     = "no pacing"
	StrategyAdaptive = "AWS adaptive"
	StrategyPacer    = "header pacing"
	StrategyIdeal    = "ideal FCFS (server queues)"
)

// Strategies lists them in table order.
var Strategies = []string{StrategyNone, StrategyAdaptive, StrategyPacer, StrategyIdeal}

// Result is one strategy's run.
type Result struct {
	Strategy string
	Attempts int     // sent to the server
	Refused  int     // of them, answered 429
	Failed   int     // finished without a 200
	Goodput  float64 // what succeeded, as a share of the quota over the run
	P50, P99 time.Duration
}

// RefusedShare is Refused as a share of Attempts.
func (r Result) RefusedShare() float64 {
	if r.Attempts == 0 {
		return 0
	}
	return float64(r.Refused) / float64(r.Attempts)
}

// Run simulates cfg under strategy. It uses the time package for every
// wait, so it belongs inside a testing/synctest bubble, where an hour
// passes in seconds.
func Run(cfg Config, strategy string) Result {
	srv := NewServer(cfg.Format, cfg.RPM, cfg.TPM, cfg.Seed)
	srv.Queue = strategy == StrategyIdeal
	tr := newTransport(srv, strategy)
	end := time.Now().Add(cfg.Duration)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		res       = Result{Strategy: strategy}
		good      float64
	)
	var wg sync.WaitGroup
	for i := range cfg.Callers {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		wg.Go(func() {
			for time.Now().Before(end) {
				cost := cfg.CostMin + rng.IntN(cfg.CostMax-cfg.CostMin+1)
				began := time.Now()
				ok := call(tr, cost)
				done := time.Now()
				mu.Lock()
				latencies = append(latencies, done.Sub(began))
				if !ok {
					res.Failed++
				} else if !done.After(end) {
					good += goodputOf(cfg, cost)
				}
				mu.Unlock()
				if !ok && done.Sub(began) < time.Second {
					// A call that failed at once is followed a second
					// later, as a real caller would, rather than spin.
					time.Sleep(time.Second)
				}
			}
		})
	}
	wg.Wait()
	res.Attempts, res.Refused = srv.Counts()
	minutes := cfg.Duration.Minutes()
	// The quota: a minute's worth a minute, plus the full buckets at the
	// start; fixed windows hold no more than their minute.
	quota := minutes + 1
	if windowed(cfg.Format) {
		quota = minutes
	}
	res.Goodput = good / quota
	slices.Sort(latencies)
	res.P50, res.P99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	return res
}

// newTransport returns the client side of strategy: a retry.Transport to
// srv, with a Pacer for header pacing, or over the AWS limiter.
func newTransport(srv *Server, strategy string) *retry.Transport {
	tr := &retry.Transport{Base: srv, Policy: retry.Policy{
		// Every attempt may wait long at the server (the ideal) or in the
		// AWS limiter, which sits below the Transport: only the Deadline
		// bounds a call.
		AttemptTimeout:   time.Hour,
		RetryAfterJitter: 0.1,
	}}
	switch strategy {
	case StrategyAdaptive:
		tr.Base = adaptiveRT{lim: NewAdaptive(time.Now()), next: srv}
	case StrategyPacer:
		tr.Pacer = &pace.Pacer{Cost: func(r *http.Request) int64 {
			n, _ := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
			return n
		}}
	}
	return tr
}

// goodputOf is what a call of cost tokens uses of a minute's quota: of
// tokens, except for the github and ietf formats, whose fixed windows
// count requests only.
func goodputOf(cfg Config, cost int) float64 {
	if windowed(cfg.Format) {
		return 1 / cfg.RPM
	}
	return float64(cost) / cfg.TPM
}

// call makes one call of cost tokens and reports whether it succeeded.
func call(tr http.RoundTripper, cost int) bool {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://api.example.com/v1/chat", http.NoBody)
	req.Header.Set("Authorization", "Bearer sk-simulated")
	req.Header.Set("X-Cost", strconv.Itoa(cost))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}
