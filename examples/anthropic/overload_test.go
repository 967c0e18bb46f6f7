package main

// The recipe against an overloaded Messages API: a server that serves a
// few requests at a time and answers every request above them with a 529
// overloaded_error at once, without rate-limit headers and without a
// Retry-After, as Anthropic does when the model is busy. There is no rate
// limit to read; what a client can learn is how many requests the server
// takes at once.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/retrykit/retry"
	"go.uber.org/goleak"
)

// The load of TestRecipeUnderOverload.
const (
	overloadSlots   = 10                     // requests the fake serves at once
	overloadServe   = 500 * time.Millisecond // how long each takes
	overloadCallers = 50                     // goroutines calling in a loop
	overloadFor     = 30 * time.Second       // virtual time in which calls start
)

// overloadURL is the base URL the clients of the overload test use; their
// requests never leave the process.
const overloadURL = "https://api.anthropic.test"

// overloadedBody is Anthropic's answer to a request it has no room for.
const overloadedBody = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

// overloadFake is an in-memory Messages API, an http.RoundTripper, that
// serves at most slots requests at a time, each for serve, and answers
// every request above them with a 529 at once. It keeps time with the
// time package, so that inside a testing/synctest bubble the serving takes
// virtual time only. It is safe for concurrent use.
type overloadFake struct {
	slots int
	serve time.Duration
	reply string // the body of a served request

	mu   sync.Mutex // protects busy
	busy int        // requests being served

	requests atomic.Int64 // requests received
	refused  atomic.Int64 // requests answered with a 529
}

// newOverloadFake returns a fake with overloadSlots slots of overloadServe.
func newOverloadFake() *overloadFake {
	return &overloadFake{slots: overloadSlots, serve: overloadServe, reply: messageBody("Hello, busy world.")}
}

// RoundTrip serves req, or refuses it when every slot is taken.
func (f *overloadFake) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	n := f.requests.Add(1)
	if req.Method != http.MethodPost || req.URL.Path != "/v1/messages" {
		return fakeResponse(req, n, http.StatusNotFound, errorBody("not_found_error", "Not found")), nil
	}
	if !f.take() {
		f.refused.Add(1)
		return fakeResponse(req, n, 529, overloadedBody), nil
	}
	defer f.free()
	timer := time.NewTimer(f.serve)
	defer timer.Stop()
	select {
	case <-timer.C:
		return fakeResponse(req, n, http.StatusOK, f.reply), nil
	case <-req.Context().Done():
		return nil, fmt.Errorf("fake Messages API: %w", context.Cause(req.Context()))
	}
}

// take claims a slot, reporting false when there is none.
func (f *overloadFake) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy >= f.slots {
		return false
	}
	f.busy++
	return true
}

// free gives a slot back.
func (f *overloadFake) free() {
	f.mu.Lock()
	f.busy--
	f.mu.Unlock()
}

// fakeResponse is the fake's answer number n to req: a JSON body and a
// request-id, and no rate-limit headers.
func fakeResponse(req *http.Request, n int64, status int, body string) *http.Response {
	h := jsonHeader("request-id", "req_overload"+strconv.FormatInt(n, 10))
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// slotLimit is the oracle's client side: a RoundTripper that sends at most
// cap(slots) requests through base at a time, the others waiting their
// turn. It knows the server's limit, which no real client is told.
type slotLimit struct {
	base  http.RoundTripper
	slots chan struct{}
}

// RoundTrip sends req through base once a slot is free.
func (s *slotLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case s.slots <- struct{}{}:
	case <-req.Context().Done():
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, context.Cause(req.Context())
	}
	defer func() { <-s.slots }()
	// The fake's answer is in memory: once it has returned, the server has
	// freed the slot.
	return s.base.RoundTrip(req)
}

// The rows that TestRecipeUnderOverload checks.
const (
	pacedRow  = "recipe + shared Pacer"
	oracleRow = "oracle: 10-slot semaphore under the recipe"
)

// overloadSetup is one way of calling the fake: a row of the table.
type overloadSetup struct {
	name   string
	client func(base http.RoundTripper) anthropic.Client
}

// overloadTransport is the example's Transport (newPolicy, newTransport),
// sending through base, without logging. Its Policy keeps the real clock,
// which inside a bubble is virtual.
func overloadTransport(base http.RoundTripper) *retry.Transport {
	t := newTransport(newPolicy(slog.New(slog.DiscardHandler)))
	t.Base = base
	return t
}

// overloadSetups returns the ways of calling the fake, each with a client
// of its own: the SDK alone, the recipe, the recipe with a Budget or a
// Pacer, and the oracle.
func overloadSetups() []overloadSetup {
	return []overloadSetup{{
		name: "SDK retries alone (2 retries, no Transport)",
		client: func(base http.RoundTripper) anthropic.Client {
			return anthropic.NewClient(
				option.WithAPIKey("sk-ant-test"),
				option.WithBaseURL(overloadURL),
				option.WithHTTPClient(&http.Client{Transport: base}),
			)
		},
	}, {
		name: "recipe, no Pacer",
		client: func(base http.RoundTripper) anthropic.Client {
			return newClient("sk-ant-test", overloadURL, overloadTransport(base))
		},
	}, {
		name: "recipe + shared Budget",
		client: func(base http.RoundTripper) anthropic.Client {
			t := overloadTransport(base)
			t.Policy.Budget = &retry.Budget{}
			return newClient("sk-ant-test", overloadURL, t)
		},
	}, {
		name: pacedRow,
		client: func(base http.RoundTripper) anthropic.Client {
			t := overloadTransport(base)
			t.Pacer = newPacer(slog.New(slog.DiscardHandler)) // as main sets it
			return newClient("sk-ant-test", overloadURL, t)
		},
	}, {
		name: oracleRow,
		client: func(base http.RoundTripper) anthropic.Client {
			return newClient("sk-ant-test", overloadURL,
				overloadTransport(&slotLimit{base: base, slots: make(chan struct{}, overloadSlots)}))
		},
	}}
}

// overloadResult is what one setup got.
type overloadResult struct {
	name       string
	ok, failed int64            // calls
	requests   int64            // requests that reached the fake
	refused    int64            // of them, answered with a 529
	last       time.Duration    // when the last call ended, from the first call's start
	failedBy   map[string]int64 // failed calls, by what explain says of their error
}

// runOverload runs overloadCallers goroutines, each calling Messages.New
// in a loop until overloadFor of virtual time has passed, through the
// client that s makes, against a fresh fake. The calls under way then run
// to their end.
func runOverload(t *testing.T, s overloadSetup) overloadResult {
	r := overloadResult{name: s.name, failedBy: map[string]int64{}}
	synctest.Test(t, func(t *testing.T) {
		f := newOverloadFake()
		client := s.client(f)
		var ok, failed atomic.Int64
		var mu sync.Mutex // protects r.failedBy
		start := time.Now()
		var wg sync.WaitGroup
		for range overloadCallers {
			wg.Go(func() {
				for time.Since(start) < overloadFor {
					_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
						Model:     model,
						MaxTokens: 256,
						Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
					})
					if err == nil {
						ok.Add(1)
						continue
					}
					failed.Add(1)
					mu.Lock()
					r.failedBy[explain(err)]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		r.last = time.Since(start)
		r.ok, r.failed = ok.Load(), failed.Load()
		r.requests, r.refused = f.requests.Load(), f.refused.Load()
	})
	return r
}

// TestRecipeUnderOverload runs the recipe, and the ways around it, against
// a Messages API that serves 10 requests at a time and refuses the rest
// with a 529 at once: 50 callers, 30 seconds of virtual time. The recipe
// with a shared Pacer must fail no call and serve nearly as many as a
// client that knows the server's limit and never exceeds it.
func TestRecipeUnderOverload(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	start := time.Now()
	setups := overloadSetups()
	results := make([]overloadResult, 0, len(setups))
	byName := map[string]overloadResult{}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			r := runOverload(t, s)
			results = append(results, r)
			byName[r.name] = r
		})
	}
	paced, oracle := byName[pacedRow], byName[oracleRow]
	if len(results) != len(setups) || oracle.name == "" || paced.name == "" {
		t.Fatalf("%d of %d setups ran", len(results), len(setups))
	}
	t.Logf("%d callers, %d slots of %v, calls started for %v of virtual time (%v of real time):\n\n%s",
		overloadCallers, overloadSlots, overloadServe, overloadFor, time.Since(start).Round(time.Millisecond),
		overloadTable(results, oracle.ok))
	for _, r := range results {
		for why, n := range r.failedBy {
			t.Logf("%s: %d calls failed: %s", r.name, n, why)
		}
	}

	if oracle.failed != 0 || oracle.refused != 0 {
		t.Errorf("%s: %d calls failed and %d requests refused, want none", oracle.name, oracle.failed, oracle.refused)
	}
	if oracle.ok == 0 {
		t.Fatalf("%s: no call succeeded", oracle.name)
	}
	if paced.failed != 0 {
		t.Errorf("%s: %d calls failed, want none", paced.name, paced.failed)
	}
	if paced.ok*100 < oracle.ok*95 {
		t.Errorf("%s: %d calls ok, want at least 95%% of the oracle's %d", paced.name, paced.ok, oracle.ok)
	}
}

// overloadTable writes results as a Markdown table, with each setup's
// goodput as a share of oracleOK.
func overloadTable(results []overloadResult, oracleOK int64) string {
	var b strings.Builder
	b.WriteString("| setup | calls ok | calls failed | requests | refused (529) | goodput vs oracle | last call ended |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d (%.1f%%) | %.1f%% | %.1f s |\n",
			r.name, r.ok, r.failed, r.requests, r.refused, percent(r.refused, r.requests),
			percent(r.ok, oracleOK), r.last.Seconds())
	}
	return b.String()
}

// percent returns n as a percentage of of, 0 when of is 0.
func percent(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
