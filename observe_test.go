package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// scripted answers each request with the next status of codes.
type scripted struct {
	codes []int
	calls atomic.Int32
	seen  []int // AttemptFromContext of each attempt, -1 when absent
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	n := int(s.calls.Add(1))
	derived, cancel := context.WithCancel(req.Context()) // as net/http derives one
	defer cancel()
	a, ok := retry.AttemptFromContext(derived)
	if !ok {
		a = -1
	}
	s.seen = append(s.seen, a)
	code := s.codes[min(n, len(s.codes))-1]
	return &http.Response{StatusCode: code, Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader("x"))}, nil
}

func TestAttemptFromContext(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
	base := &scripted{codes: []int{503, 503, 200}}
	resp, err := retry.NewTransport(base, p).RoundTrip(httptest.NewRequest(http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if diff := cmp.Diff([]int{1, 2, 3}, base.seen); diff != "" {
		t.Errorf("Transport attempts (-want +got):\n%s", diff)
	}
	var seen []int
	_, _ = retry.Do(context.Background(), p, func(ctx context.Context) (int, error) {
		n, _ := retry.AttemptFromContext(ctx)
		seen = append(seen, n)
		if n < 2 {
			return 0, io.ErrUnexpectedEOF
		}
		return n, nil
	})
	if diff := cmp.Diff([]int{1, 2}, seen); diff != "" {
		t.Errorf("Do attempts (-want +got):\n%s", diff)
	}
	for _, ctx := range []context.Context{context.Background(), nil} {
		if n, ok := retry.AttemptFromContext(ctx); ok || n != 0 {
			t.Errorf("AttemptFromContext(%v) = %d, %v; want 0, false", ctx, n, ok)
		}
	}
}

func TestOnDone(t *testing.T) {
	t.Parallel()
	errFinal := errors.New("final")
	type key struct{}
	tests := []struct {
		name   string
		policy retry.Policy
		errs   []error // returned by the attempts in turn
		cancel bool    // the caller cancels during the first sleep
		want   retry.Outcome
	}{
		{name: "success after two retries", errs: []error{io.EOF, io.EOF, nil},
			want: retry.Outcome{Attempts: 3, Slept: 1500 * time.Millisecond}},
		{name: "final error", errs: []error{errFinal},
			want: retry.Outcome{Attempts: 1, Err: errFinal}},
		{name: "attempts run out", policy: retry.Policy{MaxAttempts: 2}, errs: []error{io.EOF, io.EOF},
			want: retry.Outcome{Attempts: 2, Slept: 500 * time.Millisecond, Reason: retry.ReasonMaxAttempts}},
		{name: "deadline", policy: retry.Policy{Deadline: 600 * time.Millisecond}, errs: []error{io.EOF, io.EOF},
			want: retry.Outcome{Attempts: 2, Slept: 500 * time.Millisecond, Reason: retry.ReasonDeadline}},
		{name: "budget", policy: retry.Policy{Budget: &retry.Budget{Ratio: 0.0001, MinPerSecond: 0.01, Window: time.Second, Clock: clockwork.NewFakeClock()}}, errs: []error{io.EOF},
			want: retry.Outcome{Attempts: 1, Reason: retry.ReasonBudget}},
		{name: "caller cancels", errs: []error{io.EOF}, cancel: true, // the sleep ends at once
			want: retry.Outcome{Attempts: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "caller"))
			defer cancel()
			p := tt.policy
			p.Clock, p.Rand = ft.Clock, ft.Rand
			p.Sleep = func(ctx context.Context, d time.Duration) error {
				if tt.cancel {
					cancel()
				}
				return ft.Sleep(ctx, d)
			}
			var outcomes []retry.Outcome
			p.OnDone = func(o retry.Outcome) { outcomes = append(outcomes, o) }
			calls := 0
			_, err := retry.Do(ctx, p, func(context.Context) (int, error) {
				calls++
				return calls, tt.errs[calls-1]
			})
			if len(outcomes) != 1 {
				t.Fatalf("OnDone called %d times, want once", len(outcomes))
			}
			got := outcomes[0]
			if got.Context.Value(key{}) != "caller" {
				t.Error("Outcome.Context is not the caller's")
			}
			if got.Err != err {
				t.Errorf("Outcome.Err = %v, want what Do returned: %v", got.Err, err)
			}
			if wantLast := tt.errs[0]; len(tt.errs) > 1 || tt.want.Reason != "" || tt.cancel {
				if got.Last != wantLast {
					t.Errorf("Outcome.Last = %v, want the last retryable error %v", got.Last, wantLast)
				}
			} else if got.Last != nil {
				t.Errorf("Outcome.Last = %v, want nil: no error was retried", got.Last)
			}
			got.Context, got.Err, got.Last, tt.want.Err = nil, nil, nil, nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOnDoneTransport: a Transport that gives up on a retryable status
// hands the last response back with a nil error, and reports the give-up
// and the request; OnRetry and OnDone each report once per event.
func TestOnDoneTransport(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	var outcomes []retry.Outcome
	var events []retry.Event
	p := retry.Policy{MaxAttempts: 3, Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
		OnRetry: func(e retry.Event) { events = append(events, e) },
		OnDone:  func(o retry.Outcome) { outcomes = append(outcomes, o) }}
	req := httptest.NewRequest(http.MethodGet, "http://api.example/", nil)
	resp, err := retry.NewTransport(&scripted{codes: []int{503}}, p).RoundTrip(req)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("RoundTrip = %v, %v; want the last 503", resp, err)
	}
	resp.Body.Close()
	if len(outcomes) != 1 || len(events) != 2 {
		t.Fatalf("%d outcomes and %d events, want 1 and 2", len(outcomes), len(events))
	}
	o := outcomes[0]
	if o.Attempts != 3 || o.Reason != retry.ReasonMaxAttempts || o.Err != nil || o.Request != req ||
		o.Slept != 1500*time.Millisecond {
		t.Errorf("Outcome = %+v; want 3 attempts, max_attempts, no error, the request, 1.5s slept", o)
	}
	if events[0].Context != req.Context() {
		t.Error("Event.Context is not the caller's")
	}
}

func ExampleAttemptFromContext() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A resend is marked so that the server's logs can tell.
		if r.Header.Get("Resend-Count") == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	// A base that marks every attempt after the first: the Transport never
	// modifies the caller's request, so the base clones it to add a header.
	mark := roundTripper(func(req *http.Request) (*http.Response, error) {
		if n, _ := retry.AttemptFromContext(req.Context()); n > 1 {
			req = req.Clone(req.Context())
			req.Header.Set("Resend-Count", fmt.Sprint(n-1))
		}
		return http.DefaultTransport.RoundTrip(req)
	})
	ft := retrytest.NewFakeTime()
	client := &http.Client{Transport: retry.NewTransport(mark, retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand})}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

func ExamplePolicy_onDone() {
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, MaxAttempts: 3,
		OnDone: func(o retry.Outcome) {
			fmt.Printf("attempts=%d slept=%v reason=%q\n", o.Attempts, o.Slept, o.Reason)
		}}
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		return 0, &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
	})
	fmt.Println(err)
	// Output:
	// attempts=3 slept=1.5s reason="max_attempts"
	// retry: gave up after 3 attempts (max_attempts): retry: HTTP 503 Service Unavailable
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// holdPacer is a Pacer that holds every caller for the Retry-After the
// Transport reports with a response: the least a Pacer may do with Done.
// It is its own Reservation.
type holdPacer struct {
	mu    sync.Mutex
	until time.Time
}

func (p *holdPacer) Reserve(_ *http.Request, _ int, clock clockwork.Clock, _ time.Duration) (retry.Reservation, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p, p.until.Sub(clock.Now())
}

func (p *holdPacer) Ready(clockwork.Clock, time.Duration, bool) time.Duration { return 0 }
func (p *holdPacer) Cancel()                                                  {}
func (p *holdPacer) Done(_ *http.Request, _ *http.Response, _ error, clock clockwork.Clock, hold, _ time.Duration) {
	if hold > 0 {
		p.mu.Lock()
		p.until = clock.Now().Add(hold)
		p.mu.Unlock()
	}
}

// TestOnDoneReportsPacerWait: a call that waited for the Transport's Pacer
// reports the wait in Outcome.Waited, apart from the time it slept; the
// Pacer is told the 429's Retry-After as the hold.
func TestOnDoneReportsPacerWait(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	var outcomes []retry.Outcome
	p := retry.Policy{MaxAttempts: 1, Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
		OnDone: func(o retry.Outcome) { outcomes = append(outcomes, o) }}
	calls := 0
	base := roundTripper(func(req *http.Request) (*http.Response, error) {
		h := http.Header{}
		code := http.StatusOK
		if calls++; calls == 1 {
			code = http.StatusTooManyRequests
			h.Set("Retry-After", "2")
		}
		return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
	})
	tr := &retry.Transport{Base: base, Policy: p, Pacer: &holdPacer{}}
	for range 2 {
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://api.example/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(outcomes) != 2 || outcomes[0].Waited != 0 || outcomes[1].Waited != 2*time.Second || outcomes[1].Slept != 0 {
		t.Errorf("outcomes %+v; want the second call to report a 2s wait for the Pacer and no sleep", outcomes)
	}
}
