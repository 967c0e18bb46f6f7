package bench

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrykit/retry"
)

// middleware is one way to retry: a constructor that wraps a base
// RoundTripper, set to wait zero between attempts and make at most 5.
type middleware struct {
	name string
	wrap func(http.RoundTripper) http.RoundTripper
}

func noSleep(context.Context, time.Duration) error { return nil }

var middlewares = []middleware{
	{name: "bare", wrap: func(rt http.RoundTripper) http.RoundTripper { return rt }},
	{name: "retry", wrap: func(rt http.RoundTripper) http.RoundTripper {
		// The default Policy (5 attempts, a 10 s timeout per attempt),
		// without the sleeps.
		return retry.NewTransport(rt, retry.Policy{Sleep: noSleep})
	}},
	{name: "retryablehttp", wrap: func(rt http.RoundTripper) http.RoundTripper {
		c := retryablehttp.NewClient()
		c.HTTPClient = &http.Client{Transport: rt}
		c.Logger = nil
		c.RetryMax = 4
		c.RetryWaitMin, c.RetryWaitMax = 0, 0
		return &retryablehttp.RoundTripper{Client: c}
	}},
	{name: "rehttp", wrap: func(rt http.RoundTripper) http.RoundTripper {
		return rehttp.NewTransport(rt, rehttp.RetryAll(
			rehttp.RetryMaxRetries(4),
			rehttp.RetryAny(rehttp.RetryStatuses(http.StatusServiceUnavailable), rehttp.RetryTemporaryErr()),
		), rehttp.ConstDelay(0))
	}},
	{name: "rehttp-timeout", wrap: func(rt http.RoundTripper) http.RoundTripper {
		// rehttp with a timeout per attempt, as retry has by default: the
		// like-for-like comparison.
		t := rehttp.NewTransport(rt, rehttp.RetryAll(
			rehttp.RetryMaxRetries(4),
			rehttp.RetryAny(rehttp.RetryStatuses(http.StatusServiceUnavailable), rehttp.RetryTemporaryErr()),
		), rehttp.ConstDelay(0))
		t.PerAttemptTimeout = retry.DefaultAttemptTimeout
		return t
	}},
	{name: "failsafe", wrap: func(rt http.RoundTripper) http.RoundTripper {
		return failsafehttp.NewRoundTripper(rt, failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(5).Build())
	}},
}

func newGet(b *testing.B, url string) func() *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return func() *http.Request { return req }
}

// runMem runs every middleware over an in-memory base playing fail; bare
// is one call to a base that answers 200.
func runMem(b *testing.B, fail []bool, newReq func() *http.Request) {
	for _, m := range middlewares {
		b.Run(m.name, func(b *testing.B) {
			base := &memRT{fail: fail}
			if m.name == "bare" {
				base = &memRT{}
			}
			counter := &bodyCounter{base: base}
			rt := m.wrap(counter)
			b.ReportAllocs()
			stop := measureCPU(b)
			for b.Loop() {
				resp, err := rt.RoundTrip(newReq())
				consume(b, resp, err)
				counter.sweep()
			}
			stop()
			b.ReportMetric(float64(counter.unclosed.Load())/float64(b.N), "unclosed/op")
		})
	}
}

// runLoopback runs every middleware against a loopback server playing
// fail, through an http.Client on a tuned http.Transport; bare talks to a
// server that always answers 200.
func runLoopback(b *testing.B, fail []bool, parallel bool) {
	for _, m := range middlewares {
		b.Run(m.name, func(b *testing.B) {
			script := fail
			if m.name == "bare" {
				script = nil
			}
			l := newLoopback(b, script)
			counter := &bodyCounter{base: tunedTransport(b)}
			c := &http.Client{Transport: m.wrap(counter)}
			req := newGet(b, l.srv.URL+"/v1/messages")()
			do := func() {
				resp, err := c.Do(req)
				consume(b, resp, err)
			}
			do() // the first connection is not the per-request cost
			counter.sweep()
			l.conns.Store(0)
			counter.unclosed.Store(0)
			b.ReportAllocs()
			stop := measureCPU(b)
			b.ResetTimer()
			if parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						do()
					}
				})
			} else {
				for i := 0; i < b.N; i++ {
					do()
					counter.sweep()
				}
			}
			b.StopTimer()
			stop()
			counter.sweep()
			b.ReportMetric(float64(counter.unclosed.Load())/float64(b.N), "unclosed/op")
			b.ReportMetric(float64(l.conns.Load())/float64(b.N), "conns/op")
		})
	}
}

var twoFailures = []bool{true, true, false}

// BenchmarkPeers runs the library's benchmark scenarios through every
// middleware.
func BenchmarkPeers(b *testing.B) {
	b.Run("SuccessMem", func(b *testing.B) {
		runMem(b, nil, newGet(b, "http://api.example/v1/models"))
	})
	b.Run("SuccessLoopback", func(b *testing.B) { runLoopback(b, nil, false) })
	b.Run("ParallelLoopback", func(b *testing.B) { runLoopback(b, nil, true) })
	b.Run("RetryMem", func(b *testing.B) {
		runMem(b, twoFailures, newGet(b, "http://api.example/v1/models"))
	})
	b.Run("RetryLoopback", func(b *testing.B) { runLoopback(b, twoFailures, false) })
	b.Run("PostBodyMem", func(b *testing.B) {
		payload := bytes.Repeat([]byte("x"), 1<<20)
		runMem(b, []bool{true, false}, func() *http.Request {
			req, err := http.NewRequest(http.MethodPost, "http://api.example/v1/messages", bytes.NewReader(payload))
			if err != nil {
				b.Fatal(err)
			}
			req.Header["Idempotency-Key"] = []string{"k-1"}
			return req
		})
	})
	b.Run("Do", benchDo)
}

// benchDo compares retry.Do with failsafe-go's executor around a function
// that succeeds at once.
func benchDo(b *testing.B) {
	fn := succeed
	ctx := context.Background()
	exec := failsafe.With(retrypolicy.NewBuilder[int]().WithMaxAttempts(5).Build())
	calls := []struct {
		name string
		call func() (int, error)
	}{
		{name: "bare", call: func() (int, error) { return fn(ctx) }},
		{name: "retry", call: func() (int, error) { return retry.Do(ctx, retry.Policy{}, fn) }},
		{name: "failsafe", call: func() (int, error) {
			return exec.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[int]) (int, error) { return fn(e.Context()) })
		}},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			stop := measureCPU(b)
			for b.Loop() {
				v, err := c.call()
				if err != nil {
					b.Fatal(err)
				}
				sink.Add(int64(v))
			}
			stop()
		})
	}
}

// succeed is the function the Do benchmarks call; a variable, so that the
// bare call is not inlined away.
var succeed = func(context.Context) (int, error) { return 1, nil }
