package retry_test

// Benchmarks of what the retry layer costs. Each one runs the same work bare
// and through the library, as sub-benchmarks of one benchmark, so that
// their ratio is measured in one run on one machine. make bench runs them
// and prints the ratios; by hand:
//
//	go test -run '^$' -bench . -benchmem -count 10 . > bench.txt
//	cd bench && go run ./cmd/ratio ../bench.txt
//
// The ratio tool lives in the bench module, with the comparison against
// other retry libraries.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

var (
	okPayload   = []byte(`{"id":"msg_01","type":"message","content":"ok"}`)
	busyPayload = []byte(`{"error":{"type":"overloaded_error"}}`)
	jsonType    = []string{"application/json"}
	sink        atomic.Int64 // keeps results alive
)

// schedCPU sums the CPU time, in nanoseconds, of the threads whose
// schedstat files match pattern, as Linux reports them in /proc; ok is false
// on other systems.
func schedCPU(pattern string) (ns int64, ok bool) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		return 0, false
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // the thread exited
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		ns += n
	}
	return ns, true
}

// measureCPU counts the CPU time of every thread of the process until the
// function it returns is called, which reports it per operation as
// cpu-ns/op. On a machine shared with other work, wall time per operation
// grows with the load while CPU time barely moves, so cpu-ns/op is the
// steadier number to compare. It counts the garbage collector's background
// work too, which is part of what allocation costs.
//
// The benchmark goroutine is not locked to its thread: a locked thread
// makes every preemption for garbage collection a hand-off between threads,
// which inflates wall time, and more so the more a variant allocates. No
// caller of an HTTP client runs that way.
func measureCPU(b *testing.B) (stop func()) {
	const pattern = "/proc/self/task/*/schedstat"
	start, ok := schedCPU(pattern)
	return func() {
		end, ok2 := schedCPU(pattern)
		if ok && ok2 && b.N > 0 && end >= start {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// response returns a fresh response, as a real transport would: a new
// Response, header map and body on every call.
func response(req *http.Request, code int) *http.Response {
	p, status := okPayload, "200 OK"
	if code != http.StatusOK {
		p, status = busyPayload, "503 Service Unavailable"
	}
	return &http.Response{
		Status: status, StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": jsonType},
		Body:          io.NopCloser(bytes.NewReader(p)),
		ContentLength: int64(len(p)),
		Request:       req,
	}
}

// memRT answers in memory: with 503 on the calls where the script (a cycle
// of booleans, true meaning 503) says so, else 200. It reads and closes any
// request body first, as a real transport does. It is not safe for
// concurrent use; each benchmark has its own.
type memRT struct {
	fail []bool // nil: always 200
	n    int
}

func (m *memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		n, _ := io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
		sink.Add(n)
	}
	code := http.StatusOK
	if len(m.fail) > 0 {
		if m.fail[m.n%len(m.fail)] {
			code = http.StatusServiceUnavailable
		}
		m.n++
	}
	return response(req, code), nil
}

// consume reads the response body to its end and closes it, as a caller
// does.
func consume(b *testing.B, resp *http.Response, err error) {
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	if err := resp.Body.Close(); err != nil {
		b.Fatal(err)
	}
	sink.Add(n)
}

// noSleep makes retries immediate, so that only the mechanism is measured.
func noSleep(context.Context, time.Duration) error { return nil }

// handLoop is the least a retry can cost: call again on 503, rewind the body
// with GetBody, drain and close the dropped response. It keeps none of the
// library's rules (no timeouts, no deadline, no backoff).
func handLoop(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r = new(http.Request)
			*r = *req
			r.Body = body
		}
		resp, err := rt.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || attempt == 5 {
			return resp, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}
}

func newGet(b *testing.B, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

// timeoutRT is the least a middleware that bounds each attempt can do with
// the standard library: context.WithTimeout, a shallow copy of the request,
// and a body that cancels the context when closed (net/http's
// cancelTimerBody). It keeps none of retry's other rules; its timeout also
// covers reading the body. With noTimer it is a context.WithCancel: a
// context of its own per call, as every per-attempt context is, with
// nothing to end it but the body's Close.
type timeoutRT struct {
	base    http.RoundTripper
	noTimer bool
}

func (t timeoutRT) RoundTrip(req *http.Request) (*http.Response, error) {
	var ctx context.Context
	var cancel context.CancelFunc
	if t.noTimer {
		ctx, cancel = context.WithCancel(req.Context())
	} else {
		ctx, cancel = context.WithTimeout(req.Context(), retry.DefaultAttemptTimeout)
	}
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// floorRT is the least any middleware that bounds attempts with a context
// of their own must do: hand the base a copy of the request carrying that
// context, since the caller's request is never modified. Here the context
// is made once, and nothing else happens: no timer, no clock, no state.
type floorRT struct {
	base http.RoundTripper
	ctx  context.Context
}

func (t floorRT) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(req.WithContext(t.ctx))
}

// BenchmarkSuccessMem is the pure overhead of the middleware: a base that
// answers 200 from memory, with the default Policy. floor is the request
// copy alone that any per-attempt context costs; stdtimeout a bare
// per-attempt timeout built from the standard library, for scale.
func BenchmarkSuccessMem(b *testing.B) {
	req := newGet(b, "http://api.example/v1/models")
	run := func(rt http.RoundTripper) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			defer measureCPU(b)()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				consume(b, resp, err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("bare", run(&memRT{}))
	b.Run("floor", run(floorRT{base: &memRT{}, ctx: ctx}))
	b.Run("stdtimeout", run(timeoutRT{base: &memRT{}}))
	b.Run("retry", run(retry.NewTransport(&memRT{}, retry.Policy{})))
	// A call that may be hedged, answered before the delay: the cost of
	// the race (a goroutine, a timer, the attempt's own context) when no
	// hedge is sent.
	b.Run("hedged", run(retry.NewTransport(&memRT{}, retry.Policy{Hedge: retry.Hedge{Max: 1, Delay: time.Second}})))
}

// loopback is an HTTP/1.1 server on 127.0.0.1 that answers 200 with a small
// JSON body and counts the connections it accepts.
type loopback struct {
	srv   *httptest.Server
	conns atomic.Int64
}

func newLoopback(b *testing.B) *loopback {
	l := new(loopback)
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = jsonType
		_, _ = w.Write(okPayload)
	}))
	l.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			l.conns.Add(1)
		}
	}
	l.srv.Start()
	b.Cleanup(l.srv.Close)
	return l
}

// tunedTransport is a base transport as a service calling one API host
// would configure it: enough idle connections for every caller.
func tunedTransport(b *testing.B) *http.Transport {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	b.Cleanup(tr.CloseIdleConnections)
	return tr
}

// loopbackRun runs one sub-benchmark against a fresh server, reporting new
// connections per request.
func loopbackRun(b *testing.B, parallel bool, wrap func(http.RoundTripper) http.RoundTripper) {
	b.ReportAllocs()
	l := newLoopback(b)
	c := &http.Client{Transport: wrap(tunedTransport(b))}
	req := newGet(b, l.srv.URL+"/v1/models")
	do := func() {
		resp, err := c.Do(req)
		consume(b, resp, err)
	}
	do() // the first connection is not the per-request cost
	l.conns.Store(0)
	stopCPU := measureCPU(b)
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
		}
	}
	b.StopTimer()
	stopCPU()
	b.ReportMetric(float64(l.conns.Load())/float64(b.N), "conns/op")
}

func bare(rt http.RoundTripper) http.RoundTripper { return rt }

func withRetry(rt http.RoundTripper) http.RoundTripper {
	return retry.NewTransport(rt, retry.Policy{})
}

// BenchmarkSuccessLoopback is a real HTTP/1.1 round trip on 127.0.0.1
// through a tuned http.Transport, bare and through the middleware.
func BenchmarkSuccessLoopback(b *testing.B) {
	b.Run("bare", func(b *testing.B) { loopbackRun(b, false, bare) })
	b.Run("retry", func(b *testing.B) { loopbackRun(b, false, withRetry) })
	b.Run("hedged", func(b *testing.B) { loopbackRun(b, false, withHedge) })
}

// withHedge is withRetry with a hedge after a second: on loopback it is
// never sent, so this is what the race costs a call.
func withHedge(rt http.RoundTripper) http.RoundTripper {
	return retry.NewTransport(rt, retry.Policy{Hedge: retry.Hedge{Max: 1, Delay: time.Second}})
}

// BenchmarkPairedLoopback is SuccessLoopback measured in pairs: every
// iteration makes one bare call and one through a middleware, in turn
// first, each on its own tuned http.Transport against one server, and
// times each. Machine load drifts over seconds, and a loopback call's time
// varies by 15% from one pass to the next; the two calls of a pair see the
// same load, so the mean of their differences shows an overhead of a few
// percent that separate runs cannot. Each variant reports the bare call's
// mean, its own, and its overhead in percent (ns/op is a pair's time):
// floor is a request copy with a context made once; stdcancel a
// context.WithCancel per call, cancelled at Close (a context per attempt,
// without a timer); stdtimeout a context.WithTimeout per call, cancelled
// at Close; retry the Transport.
func BenchmarkPairedLoopback(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("floor", func(b *testing.B) {
		pairedRun(b, func(rt http.RoundTripper) http.RoundTripper { return floorRT{base: rt, ctx: ctx} })
	})
	b.Run("stdcancel", func(b *testing.B) {
		pairedRun(b, func(rt http.RoundTripper) http.RoundTripper { return timeoutRT{base: rt, noTimer: true} })
	})
	b.Run("stdtimeout", func(b *testing.B) {
		pairedRun(b, func(rt http.RoundTripper) http.RoundTripper { return timeoutRT{base: rt} })
	})
	b.Run("retry", func(b *testing.B) { pairedRun(b, withRetry) })
}

func pairedRun(b *testing.B, wrap func(http.RoundTripper) http.RoundTripper) {
	l := newLoopback(b)
	bareC := &http.Client{Transport: tunedTransport(b)}
	wrapC := &http.Client{Transport: wrap(tunedTransport(b))}
	req := newGet(b, l.srv.URL+"/v1/models")
	timed := func(c *http.Client) time.Duration {
		began := time.Now()
		resp, err := c.Do(req)
		consume(b, resp, err)
		return time.Since(began)
	}
	timed(bareC) // the first connections are not the per-request cost
	timed(wrapC)
	var bareSum, wrapSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			bareSum += timed(bareC)
			wrapSum += timed(wrapC)
		} else {
			wrapSum += timed(wrapC)
			bareSum += timed(bareC)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(bareSum)/float64(b.N), "bare-ns/call")
	b.ReportMetric(float64(wrapSum)/float64(b.N), "ns/call")
	b.ReportMetric(100*float64(wrapSum-bareSum)/float64(bareSum), "overhead-%")
}

// BenchmarkParallelLoopback is SuccessLoopback from GOMAXPROCS goroutines at
// once.
func BenchmarkParallelLoopback(b *testing.B) {
	b.Run("bare", func(b *testing.B) { loopbackRun(b, true, bare) })
	b.Run("retry", func(b *testing.B) { loopbackRun(b, true, withRetry) })
}

// BenchmarkRetryMem measures two retries: the base answers 503, 503, 200.
// bare is one successful call (the floor), handloop the least a loop that
// retries can do, retry the Transport with the default Policy and no sleep.
func BenchmarkRetryMem(b *testing.B) {
	req := newGet(b, "http://api.example/v1/models")
	script := []bool{true, true, false}
	run := func(call func(*http.Request) (*http.Response, error)) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			defer measureCPU(b)()
			for b.Loop() {
				resp, err := call(req)
				if err == nil && resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
				consume(b, resp, err)
			}
		}
	}
	b.Run("bare", run((&memRT{}).RoundTrip))
	base := &memRT{fail: script}
	b.Run("handloop", run(func(r *http.Request) (*http.Response, error) { return handLoop(base, r) }))
	t := retry.NewTransport(&memRT{fail: script}, retry.Policy{Sleep: noSleep})
	b.Run("retry", run(t.RoundTrip))
}

// BenchmarkPostBodyMem sends a 1 MiB POST with an Idempotency-Key to a base
// that reads the whole body and answers 503, then 200. bare is one call,
// handloop and retry two. The body must never be copied: B/op stays near
// bare.
func BenchmarkPostBodyMem(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1<<20)
	run := func(call func(*http.Request) (*http.Response, error)) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			defer measureCPU(b)()
			for b.Loop() {
				req, err := http.NewRequest(http.MethodPost, "http://api.example/v1/messages", bytes.NewReader(payload))
				if err != nil {
					b.Fatal(err)
				}
				req.Header["Idempotency-Key"] = []string{"k-1"}
				resp, err := call(req)
				consume(b, resp, err)
			}
		}
	}
	script := []bool{true, false}
	b.Run("bare", run((&memRT{fail: script}).RoundTrip))
	base := &memRT{fail: script}
	b.Run("handloop", run(func(r *http.Request) (*http.Response, error) { return handLoop(base, r) }))
	t := retry.NewTransport(&memRT{fail: script}, retry.Policy{Sleep: noSleep})
	b.Run("retry", run(t.RoundTrip))
}

// succeed is the function BenchmarkDo calls; a variable, so that the bare
// call is not inlined away.
var succeed = func(context.Context) (int, error) { return 1, nil }

// BenchmarkDo is retry.Do around a function that succeeds at once.
func BenchmarkDo(b *testing.B) {
	fn := succeed
	ctx := context.Background()
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		defer measureCPU(b)()
		for b.Loop() {
			v, err := fn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			sink.Add(int64(v))
		}
	})
	b.Run("retry", func(b *testing.B) {
		b.ReportAllocs()
		defer measureCPU(b)()
		for b.Loop() {
			v, err := retry.Do(ctx, retry.Policy{}, fn)
			if err != nil {
				b.Fatal(err)
			}
			sink.Add(int64(v))
		}
	})
}
