package retry_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// loadScript returns n answers, 30% of them failures: 503, 429 or a reset
// connection, in a fixed random order; then 200 for ever. It also returns
// how many resets the first k answers hold, for any k.
func loadScript(n int) ([]retrytest.Step, func(k int) int) {
	r := rand.New(rand.NewPCG(1, 2))
	steps := make([]retrytest.Step, n, n+1)
	resets := make([]int, n+1)
	for i := range steps {
		switch v := r.IntN(100); {
		case v < 10:
			steps[i] = retrytest.Status(503)
		case v < 20:
			steps[i] = retrytest.Status(429, "Retry-After", "0")
		case v < 30:
			steps[i] = retrytest.Step{Reset: true}
		default:
			steps[i] = retrytest.Step{Body: "ok"}
		}
		resets[i+1] = resets[i]
		if steps[i].Reset {
			resets[i+1]++
		}
	}
	return append(steps, retrytest.Step{Body: "ok"}), func(k int) int { return resets[min(k, n)] }
}

func TestLoadThousandConcurrentRequests(t *testing.T) {
	const requests, maxConns = 1000, 32
	const deadline = 5 * time.Second
	script, resetsIn := loadScript(3 * requests)
	s := retrytest.NewServer(t, script...)
	base := newBase(t)
	base.MaxConnsPerHost, base.MaxIdleConnsPerHost = maxConns, maxConns
	// An attempt cut by its timeout or by the Deadline closes its
	// connection, as net/http does for a request whose context ends: on a
	// loaded machine some are, and each may cost a new connection.
	var timedOut atomic.Int64
	rt := retry.NewTransport(base, retry.Policy{MaxAttempts: 5, AttemptTimeout: 2 * time.Second,
		Deadline: deadline, Base: time.Millisecond, Cap: 5 * time.Millisecond,
		OnRetry: func(e retry.Event) {
			if errors.Is(e.Err, context.DeadlineExceeded) {
				timedOut.Add(1)
			}
		}})
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		slowest  time.Duration
	)
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			req := mustRequest(t, "GET", s.URL, nil)
			if i%2 == 1 {
				req = mustRequest(t, "POST", s.URL, []byte("payload"))
				req.Header.Set("Idempotency-Key", "k")
			}
			start := time.Now()
			got := loadOutcome(rt.RoundTrip(req))
			took := time.Since(start)
			mu.Lock()
			outcomes[got]++
			slowest = max(slowest, took)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if slowest > deadline+time.Second {
		t.Errorf("slowest request took %v, want at most the Deadline %v and a margin", slowest, deadline)
	}
	for k, n := range outcomes {
		if k != "200" && k != "503" && k != "429" && k != "*retry.Error" {
			t.Errorf("%d requests ended with %s", n, k)
		}
	}
	resets := resetsIn(s.Requests())
	cut := int(timedOut.Load()) + outcomes["*retry.Error"] // attempts cut by a timeout, at most
	if s.Conns() > maxConns+resets+cut {
		t.Errorf("%d connections, want at most %d (MaxConnsPerHost) + %d (one per reset) + %d (one per attempt cut by a timeout)",
			s.Conns(), maxConns, resets, cut)
	}
	t.Logf("%d requests in %v (slowest %v): outcomes %v; server saw %d requests on %d connections (%d resets, %d attempts cut)",
		requests, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond), outcomes, s.Requests(), s.Conns(), resets, cut)
}

// loadOutcome names how a request ended, reading and closing its body.
func loadOutcome(resp *http.Response, err error) string {
	var re *retry.Error
	switch {
	case errors.As(err, &re):
		return "*retry.Error"
	case err != nil:
		return "error " + err.Error()
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode == 200 && string(body) != "ok" {
		return "bad body"
	}
	return strconv.Itoa(resp.StatusCode)
}
