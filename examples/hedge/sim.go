package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"

	"github.com/retrykit/retry"
)

// Config is one simulation: callers making GETs one after another, first
// against a Store with a long tail, then against a saturated Queue.
type Config struct {
	Model     Model         // the Store's time to headers
	Tail      Load          // the callers of the Store
	Saturated Load          // the callers of the Queue
	C         int           // requests the Queue serves at a time
	Service   time.Duration // the Queue's mean time to serve one
	Spread    float64       // the Queue's service times are Service × [1-Spread, 1+Spread]
	Seed      uint64        // of the servers' draws and the retry delays' jitter
}

// Load is how many callers make how many calls in all, each call after
// the caller's last has ended.
type Load struct {
	Callers, Calls int
}

// DefaultConfig is the README's: 20 callers making 100,000 calls to a
// Store of the DefaultModel; 40 callers making 40,000 calls to a Queue
// that serves 8 at a time, 18 to 22 ms each (400 a second, about 100 s).
func DefaultConfig() Config {
	return Config{Model: DefaultModel(), Tail: Load{Callers: 20, Calls: 100_000},
		Saturated: Load{Callers: 40, Calls: 40_000}, C: 8, Service: 20 * time.Millisecond, Spread: 0.1, Seed: 1}
}

// The scenarios.
const (
	ScenarioTail      = "long tail" // the Store: a tail of stragglers, whatever the load
	ScenarioSaturated = "saturated" // the Queue: every attempt slow because of load
)

// The rows, one setting each of what the Transport adds to the Policy.
const (
	RowNone       = "no hedging"              // Hedge off
	RowFixed      = "fixed delay at p95"      // Hedge{Max: 1, Delay: the Model's p95}
	RowAdaptive   = "adaptive"                // Hedge{Max: 1, Adaptive: &retry.HedgeDelay{}}
	RowFailsafe   = "failsafe-go hedgepolicy" // failsafe-go's HedgePolicy under the Transport, Hedge off
	RowBudget     = "adaptive, Budget"        // adaptive, with a shared &retry.Budget{}
	RowUnbudgeted = "adaptive, no Budget"     // adaptive alone, for contrast
)

// TailRows and SaturatedRows list each scenario's rows in table order.
var (
	TailRows      = []string{RowNone, RowFixed, RowAdaptive, RowFailsafe}
	SaturatedRows = []string{RowNone, RowBudget, RowUnbudgeted}
)

// objectURL is the URL of the object each call GETs: every call its own.
const objectURL = "https://store.example/objects/%d"

// drain is how long a run goes on after the last call has ended, so that
// attempts still in flight (a loser being cancelled, a request the Queue
// serves for nobody) have ended before the bodies are counted.
const drain = 10 * time.Second

// server is what Run needs of a Store or a Queue.
type server interface {
	http.RoundTripper
	Attempts() int
	Open() int
}

// Run simulates row of scenario under cfg. It uses the time package for
// every wait, so it belongs inside a testing/synctest bubble, where
// minutes pass in seconds.
func Run(cfg Config, scenario, row string) Result {
	load := cfg.Tail
	var srv server
	if scenario == ScenarioSaturated {
		load = cfg.Saturated
		srv = NewQueue(cfg.C, cfg.Service, cfg.Spread, cfg.Seed)
	} else {
		srv = NewStore(cfg.Model, cfg.Seed)
	}
	var hedges atomic.Int64
	tr := newTransport(cfg, row, srv, &hedges)
	var (
		next      atomic.Int64
		failed    atomic.Int64
		latencies = make([]time.Duration, load.Calls)
		wg        sync.WaitGroup
	)
	start := time.Now()
	for range load.Callers {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= load.Calls {
					return
				}
				took, ok := get(tr, n)
				latencies[n] = took
				if !ok {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	length := time.Since(start)
	time.Sleep(drain)
	r := Result{Scenario: scenario, Row: row, Calls: load.Calls, Failed: int(failed.Load()),
		Attempts: srv.Attempts(), Hedges: int(hedges.Load()), Open: srv.Open(), Length: length}
	if q, ok := srv.(*Queue); ok {
		r.Abandoned = q.Abandoned()
	}
	r.setLatencies(latencies)
	return r
}

// newTransport returns the Transport every caller of row shares, sending
// to base. It counts the hedges sent into hedges.
func newTransport(cfg Config, row string, base http.RoundTripper, hedges *atomic.Int64) *retry.Transport {
	p := retry.Policy{MaxAttempts: 3, AttemptTimeout: 10 * time.Second, Rand: lockedRand(cfg.Seed)}
	p.OnDone = func(o retry.Outcome) { hedges.Add(int64(o.Hedges)) }
	switch row {
	case RowFixed:
		p.Hedge = retry.Hedge{Max: 1, Delay: cfg.Model.Quantile(0.95)}
	case RowAdaptive, RowUnbudgeted:
		p.Hedge = retry.Hedge{Max: 1, Adaptive: &retry.HedgeDelay{}}
	case RowBudget:
		p.Hedge = retry.Hedge{Max: 1, Adaptive: &retry.HedgeDelay{}}
		p.Budget = &retry.Budget{}
	case RowFailsafe:
		base = failsafeHedge(base, cfg.Model.Quantile(0.95), hedges)
	case RowNone:
	default:
		panic(fmt.Sprintf("hedge: unknown row %q", row))
	}
	return &retry.Transport{Base: base, Policy: p}
}

// failsafeHedge returns next under failsafe-go's HedgePolicy with its
// defaults (at most one hedge, and the first answer, whatever it is,
// cancels the others) and delay, as failsafehttp wraps a RoundTripper. It
// counts the hedges sent into hedges.
func failsafeHedge(next http.RoundTripper, delay time.Duration, hedges *atomic.Int64) http.RoundTripper {
	policy := hedgepolicy.NewBuilderWithDelay[*http.Response](delay).
		OnHedge(func(failsafe.ExecutionEvent[*http.Response]) { hedges.Add(1) }).
		Build()
	return failsafehttp.NewRoundTripper(next, policy)
}

// lockedRand returns a seeded source of jitter that goroutines may share.
func lockedRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 0))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// get makes call n, a GET of object n, reads and closes the body, and
// returns its time to headers (from the start of the call until RoundTrip
// returns) and whether it was answered 200.
func get(tr http.RoundTripper, n int) (time.Duration, bool) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf(objectURL, n), nil)
	began := time.Now()
	resp, err := tr.RoundTrip(req)
	took := time.Since(began)
	if err != nil {
		return took, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return took, resp.StatusCode == http.StatusOK
}
