package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// openFor is the breakers' Timeout in these tests: real time, since
// gobreaker reads the real clock. Retry sleeps are fake and take no time.
const openFor = 200 * time.Millisecond

// get sends a GET through client and closes the response body, returning
// the status (0 on error) and the error.
func get(t *testing.T, client *http.Client, url string) (int, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestBreakerStopsRetriesUntilTimeout: once the breaker opens, the retry
// loop stops at once and no request reaches the server until the breaker's
// Timeout has passed; then one probe goes through.
func TestBreakerStopsRetriesUntilTimeout(t *testing.T) {
	tests := []struct {
		name       string
		probe      retrytest.Step
		wantStatus int  // of the call that probes
		wantOpen   bool // the probe fails and the breaker opens again
		wantState  gobreaker.State
	}{
		{name: "probe succeeds and closes the breaker", probe: retrytest.Status(http.StatusOK),
			wantStatus: http.StatusOK, wantState: gobreaker.StateClosed},
		{name: "probe fails and opens the breaker again", probe: retrytest.Status(http.StatusServiceUnavailable),
			wantOpen: true, wantState: gobreaker.StateOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, retrytest.Status(http.StatusServiceUnavailable))
			ft := retrytest.NewFakeTime()
			cb := newBreaker("api", openFor, nil)
			client := &http.Client{Transport: retry.NewTransport(
				breakerRoundTripper{srv.Client().Transport, cb},
				retry.Policy{MaxAttempts: 5, Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
			)}

			// Three 503s in a row open the breaker; the fourth attempt
			// fails fast and ends the retries.
			start := time.Now() // no later than the breaker's opening
			if _, err := get(t, client, srv.URL); !errors.Is(err, gobreaker.ErrOpenState) {
				t.Fatalf("first call: error %v, want one wrapping gobreaker.ErrOpenState", err)
			}
			if got, want := srv.Requests(), 3; got != want {
				t.Fatalf("first call: the server saw %d requests, want %d", got, want)
			}
			if got, want := len(ft.Sleeps()), 3; got != want {
				t.Errorf("first call: slept %d times, want %d: none after the breaker opened", got, want)
			}

			// While open, every call fails at once: no request, no sleep.
			// Calls go on for a quarter of the Timeout, a wide margin.
			calls := 0
			for time.Since(start) < openFor/4 || calls < 3 {
				calls++
				if _, err := get(t, client, srv.URL); !errors.Is(err, gobreaker.ErrOpenState) {
					t.Fatalf("call %d while open: error %v, want one wrapping gobreaker.ErrOpenState", calls, err)
				}
			}
			if got, want := srv.Requests(), 3; got != want {
				t.Errorf("after %d calls while open: the server saw %d requests, want %d", calls, got, want)
			}
			if got, want := len(ft.Sleeps()), 3; got != want {
				t.Errorf("after %d calls while open: slept %d times, want %d", calls, got, want)
			}

			waitHalfOpen(t, cb)
			if elapsed := time.Since(start); elapsed < openFor {
				t.Errorf("breaker half-open %v after opening, want at least its Timeout %v", elapsed, openFor)
			}
			srv.Script(tt.probe)
			status, err := get(t, client, srv.URL)
			if tt.wantOpen != errors.Is(err, gobreaker.ErrOpenState) || status != tt.wantStatus {
				t.Errorf("probing call: status %d, error %v; want status %d, breaker open error: %v",
					status, err, tt.wantStatus, tt.wantOpen)
			}
			if got, want := srv.Requests(), 4; got != want {
				t.Errorf("after the probe: the server saw %d requests, want %d", got, want)
			}
			if got := cb.State(); got != tt.wantState {
				t.Errorf("after the probe: breaker %v, want %v", got, tt.wantState)
			}
		})
	}
}

// waitHalfOpen polls until the breaker leaves the open state, for at most
// far longer than openFor.
func waitHalfOpen(t *testing.T, cb *gobreaker.CircuitBreaker[*http.Response]) {
	t.Helper()
	deadline := time.Now().Add(20 * openFor)
	for cb.State() == gobreaker.StateOpen {
		if time.Now().After(deadline) {
			t.Fatalf("breaker still open %v after its Timeout of %v", 20*openFor, openFor)
		}
		time.Sleep(openFor / 20)
	}
}

// TestBreakerOrder shows why the breaker goes inside the retry loop: from
// outside it sees one result per call and cannot stop the retries.
func TestBreakerOrder(t *testing.T) {
	tests := []struct {
		name         string
		inside       bool
		wantRequests int    // reaching the server for one call
		wantFailures uint32 // counted by the breaker
		wantState    gobreaker.State
	}{
		{name: "inside the retry loop", inside: true,
			wantRequests: 3, wantFailures: 0, wantState: gobreaker.StateOpen}, // counts reset on opening
		{name: "outside the retry loop",
			wantRequests: 5, wantFailures: 1, wantState: gobreaker.StateClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, retrytest.Status(http.StatusServiceUnavailable))
			ft := retrytest.NewFakeTime()
			cb := newBreaker("api", time.Hour, nil)
			p := retry.Policy{MaxAttempts: 5, Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
			var rt http.RoundTripper = retry.NewTransport(breakerRoundTripper{srv.Client().Transport, cb}, p)
			if !tt.inside {
				rt = breakerRoundTripper{retry.NewTransport(srv.Client().Transport, p), cb}
			}
			_, _ = get(t, &http.Client{Transport: rt}, srv.URL)
			if got := srv.Requests(); got != tt.wantRequests {
				t.Errorf("the server saw %d requests, want %d", got, tt.wantRequests)
			}
			if got := cb.Counts().TotalFailures; got != tt.wantFailures {
				t.Errorf("breaker counted %d failures, want %d", got, tt.wantFailures)
			}
			if got := cb.State(); got != tt.wantState {
				t.Errorf("breaker %v, want %v", got, tt.wantState)
			}
		})
	}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBreakerRoundTripper checks what the breaker counts and what it hands
// back to the retry loop.
func TestBreakerRoundTripper(t *testing.T) {
	errDropped := errors.New("connection dropped")
	tests := []struct {
		name        string
		status      int   // the base's response, when err is nil
		err         error // the base's error
		wantCounts  gobreaker.Counts
		wantStatus  int
		wantErr     error
		wantRetried bool // retry.IsRetryable(the error)
	}{
		{name: "2xx is a success", status: http.StatusOK,
			wantCounts: gobreaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1}, wantStatus: http.StatusOK},
		{name: "4xx is the caller's fault, a success for the breaker", status: http.StatusNotFound,
			wantCounts: gobreaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1}, wantStatus: http.StatusNotFound},
		{name: "5xx is a failure, and still returned", status: http.StatusBadGateway,
			wantCounts: gobreaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1}, wantStatus: http.StatusBadGateway},
		{name: "a transport error is a failure", err: errDropped,
			wantCounts: gobreaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1}, wantErr: errDropped},
		{name: "a caller that gave up is not counted", err: context.Canceled,
			wantCounts: gobreaker.Counts{Requests: 1, TotalExclusions: 1}, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cb := newBreaker("api", time.Hour, nil)
			rt := breakerRoundTripper{roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if tt.err != nil {
					return nil, tt.err
				}
				return &http.Response{StatusCode: tt.status, Body: http.NoBody, Request: r}, nil
			}), cb}
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
			resp, err := rt.RoundTrip(req)
			status := 0
			if resp != nil {
				status = resp.StatusCode
				_ = resp.Body.Close()
			}
			if status != tt.wantStatus || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("RoundTrip: status %d, error %v; want status %d, error %v", status, err, tt.wantStatus, tt.wantErr)
			}
			if got := cb.Counts(); got != tt.wantCounts {
				t.Errorf("breaker counts %+v, want %+v", got, tt.wantCounts)
			}
		})
	}
}

// closeRecorder is a request body that records being closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestBreakerOpenFailsFast: an open breaker never calls the base, closes
// the request body as a RoundTripper must, and returns an error that the
// retry loop will not retry.
func TestBreakerOpenFailsFast(t *testing.T) {
	t.Parallel()
	cb := newBreaker("api", time.Hour, nil)
	failing := true
	calls := 0
	rt := breakerRoundTripper{roundTripFunc(func(*http.Request) (*http.Response, error) {
		calls++
		if failing {
			return nil, errors.New("connection refused")
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}), cb}
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
		_, _ = rt.RoundTrip(req)
	}
	failing = false

	body := &closeRecorder{Reader: strings.NewReader("{}")}
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/", body)
	resp, err := rt.RoundTrip(req)
	if resp != nil || !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("RoundTrip on an open breaker: response %v, error %v; want nil and gobreaker.ErrOpenState", resp, err)
	}
	if retry.IsRetryable(err) {
		t.Errorf("retry.IsRetryable(%v) = true, want false", err)
	}
	if !body.closed {
		t.Error("request body left open")
	}
	if calls != 3 {
		t.Errorf("base called %d times, want 3: never while open", calls)
	}
}

// TestDemo runs the program's demo with a short Timeout.
func TestDemo(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	start := time.Now()
	if err := run(&out, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("demo took %v, want well under 5s", elapsed)
	}
	for _, want := range []string{
		"breaker: closed -> open",
		"=> failed fast: the breaker is open",
		"breaker: half-open -> closed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	if got, want := strings.Count(out.String(), "server: GET"), 5; got != want {
		t.Errorf("the demo's server saw %d requests, want %d:\n%s", got, want, out.String())
	}
}
