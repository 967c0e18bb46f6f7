// This file is copied into a copy of anthropic-sdk-go's module, next to
// its own tests (package anthropic_test), by TestAnthropicSDKSuite; it is
// not built where it is stored (testdata).
//
// TestMain puts a retry.Transport under the SDK's default client for the
// mock server's address, TEST_API_BASE_URL, and nothing else: the SDK's
// default client sends through http.DefaultTransport when that is not an
// *http.Transport, so every test that builds its client with
// anthropic.NewClient and no HTTP client of its own goes through it. Below
// the Transport, RETRY_SUITE_FAULTS=N turns every Nth attempt into a fault,
// taking turns: a 503, a 429 with Retry-After: 1, and a TCP reset once the
// body has been read, each from a server on loopback that reads the whole
// request first. The last attempt a Policy allows is never faulted, so a
// call fails only where the Transport gives up early or sends a body the
// mock rejects. What was seen is written as JSON to RETRY_SUITE_REPORT.
package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// suiteMaxAttempts is the Policy's MaxAttempts; the faults spare the last.
const suiteMaxAttempts = 4

// suiteHint is the Retry-After of the injected 429, in seconds.
const suiteHint = 1

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	base, err := url.Parse(os.Getenv("TEST_API_BASE_URL"))
	if err != nil || base.Host == "" {
		fmt.Fprintf(os.Stderr, "retry suite: TEST_API_BASE_URL is %q; it must be the mock server's URL\n",
			os.Getenv("TEST_API_BASE_URL"))
		return 2
	}
	every := 0
	if v := os.Getenv("RETRY_SUITE_FAULTS"); v != "" {
		if every, err = strconv.Atoi(v); err != nil || every < 0 {
			fmt.Fprintf(os.Stderr, "retry suite: RETRY_SUITE_FAULTS is %q; want a count, 0 for none\n", v)
			return 2
		}
	}
	plain, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		fmt.Fprintf(os.Stderr, "retry suite: http.DefaultTransport is a %T, not an *http.Transport\n", http.DefaultTransport)
		return 2
	}
	faultServer := httptest.NewServer(http.HandlerFunc(serveFault))
	defer faultServer.Close()
	// A connection of its own for every fault, so that net/http never
	// sends a request again on a fresh one after a reset on a reused one.
	toFaults := plain.Clone()
	toFaults.DisableKeepAlives = true

	rep := &suiteReport{Faults: map[string]int{}}
	faults := &faultInjector{
		next:   plain,
		faults: toFaults,
		addr:   faultServer.Listener.Addr().String(),
		every:  int64(every),
		rep:    rep,
	}
	rt := &retry.Transport{
		Base: faults,
		// Retryable and Stream as docs/llm.md's recipe has them.
		Policy: retry.Policy{
			MaxAttempts: suiteMaxAttempts,
			Retryable:   retry.LLMRetryable,
			// The delays are computed as usual (and the 429's hint is
			// checked in OnRetry) but waited for a millisecond at most.
			Sleep:   shortSleep,
			OnRetry: rep.retried,
			OnDone:  rep.done,
		},
		// The mock keeps no state: every request may be sent again, so
		// every request's replays are checked, not only generation's.
		Replayable: func(*http.Request) bool { return true },
		Stream:     &retry.Stream{Event: retry.LLMEvent},
	}
	http.DefaultTransport = &hostRouter{host: base.Host, mock: rt, other: plain}
	code := m.Run()
	http.DefaultTransport = plain

	if path := os.Getenv("RETRY_SUITE_REPORT"); path != "" {
		b, err := rep.json()
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "retry suite: writing the report: %v\n", err)
			return 2
		}
	}
	return code
}

// hostRouter sends requests for host through mock, and the rest through
// other.
type hostRouter struct {
	host        string
	mock, other http.RoundTripper
}

func (r *hostRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == r.host {
		return r.mock.RoundTrip(req)
	}
	return r.other.RoundTrip(req)
}

// shortSleep waits a millisecond at most, whatever d is.
func shortSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(min(d, time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// faultKinds are the faults, in the order they take turns.
var faultKinds = []string{"503", "429", "reset"}

// faultHeader names the fault the fault server plays.
const faultHeader = "X-Retry-Suite-Fault"

// faultInjector sends every attempt through next, except every Nth, which
// it sends to the fault server instead.
type faultInjector struct {
	next, faults http.RoundTripper
	addr         string // the fault server's
	every        int64  // 0: no faults
	n            atomic.Int64
	rep          *suiteReport
}

func (f *faultInjector) RoundTrip(req *http.Request) (*http.Response, error) {
	n := f.n.Add(1)
	attempt, _ := retry.AttemptFromContext(req.Context())
	f.rep.attempt()
	if f.every == 0 || n%f.every != 0 || attempt >= suiteMaxAttempts {
		return f.next.RoundTrip(req)
	}
	kind := faultKinds[(n/f.every)%int64(len(faultKinds))]
	f.rep.fault(kind)
	out := req.Clone(req.Context())
	out.URL.Host = f.addr
	out.Host = f.addr
	out.Header.Set(faultHeader, kind)
	return f.faults.RoundTrip(out)
}

// serveFault reads the whole request, then plays the fault it names: a
// 503 or a 429 as Anthropic's API words them, or a TCP reset (SO_LINGER 0,
// so the client reads ECONNRESET).
func serveFault(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	switch r.Header.Get(faultHeader) {
	case "503":
		writeError(w, http.StatusServiceUnavailable, "api_error", "injected 503")
	case "429":
		w.Header().Set("Retry-After", strconv.Itoa(suiteHint))
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "injected 429")
	case "reset":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	default:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "no fault named")
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
}

// suiteReport is what the Transport and the injector saw, for the driver.
type suiteReport struct {
	mu       sync.Mutex     // protects the fields below
	Attempts int            `json:"attempts"`
	Faults   map[string]int `json:"faults"`
	Retries  int            `json:"retries"`
	Hinted   int            `json:"hinted"` // retries that waited the 429's Retry-After
	Calls    int            `json:"calls"`
	Problems []string       `json:"problems"` // calls given up, 429s not waited for
}

func (r *suiteReport) attempt() {
	r.mu.Lock()
	r.Attempts++
	r.mu.Unlock()
}

func (r *suiteReport) fault(kind string) {
	r.mu.Lock()
	r.Faults[kind]++
	r.mu.Unlock()
}

func (r *suiteReport) retried(e retry.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Retries++
	if e.FromRetryAfter {
		r.Hinted++
	}
	if se, ok := errors.AsType[*retry.StatusError](e.Err); ok && se.StatusCode == http.StatusTooManyRequests &&
		(!e.FromRetryAfter || e.Delay != suiteHint*time.Second) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s %s: a 429 with Retry-After: %d was retried after %v",
			e.Request.Method, e.Request.URL.RequestURI(), suiteHint, e.Delay))
	}
}

func (r *suiteReport) done(o retry.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Calls++
	if o.Reason != "" {
		r.Problems = append(r.Problems, fmt.Sprintf("%s %s: the Transport gave up after %d attempts (%s): %v",
			o.Request.Method, o.Request.URL.RequestURI(), o.Attempts, o.Reason, o.Last))
	}
}

func (r *suiteReport) json() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return json.MarshalIndent(r, "", "  ")
}
