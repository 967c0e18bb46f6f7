package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Each attempt of a Transport call has a request copy and a context of its
// own; these tests hold the copy and the context to the rules of the
// RoundTripper contract and of the standard contexts.

// ctxBase answers from a script of statuses and keeps every attempt's
// request. Given a wait, it takes that long before answering, and fails if
// the attempt ends first: with watch set it waits on the attempt's Done, as
// a real transport does; else it polls Err, and never watches.
type ctxBase struct {
	mu     sync.Mutex
	codes  []int
	wait   time.Duration
	watch  bool
	derive bool // derive a context from each attempt and never cancel it
	reqs   []*http.Request
	kids   []context.Context
	stops  []context.CancelFunc // for the test's cleanup only
}

func (b *ctxBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	n := len(b.reqs)
	b.reqs = append(b.reqs, req)
	if b.derive {
		kid, stop := context.WithCancel(req.Context())
		b.kids, b.stops = append(b.kids, kid), append(b.stops, stop)
	}
	b.mu.Unlock()
	switch {
	case b.wait > 0 && b.watch:
		t := time.NewTimer(b.wait)
		defer t.Stop()
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-t.C:
		}
	case b.wait > 0:
		for end := time.Now().Add(b.wait); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if err := req.Context().Err(); err != nil {
				return nil, err
			}
		}
	}
	code := b.codes[min(n, len(b.codes)-1)]
	return &http.Response{
		StatusCode: code, Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader("body")),
	}, nil
}

func (b *ctxBase) attempts() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.reqs...)
}

func noWait(context.Context, time.Duration) error { return nil }

// TestEachAttemptGetsItsOwnTimeout: each attempt has the whole attempt
// timeout. Each attempt takes 60% of it; were the first deadline kept, the
// second would be cut at 40%.
func TestEachAttemptGetsItsOwnTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	base := &ctxBase{codes: []int{503, 200}, wait: timeout * 6 / 10}
	tr := NewTransport(base, Policy{AttemptTimeout: timeout, Sleep: noWait})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v (the second attempt was cut by the first one's deadline)", err)
	}
	defer resp.Body.Close()
	reqs := base.attempts()
	if resp.StatusCode != 200 || len(reqs) != 2 {
		t.Fatalf("status %d after %d attempts, want 200 after 2", resp.StatusCode, len(reqs))
	}
	if reqs[0] == reqs[1] || reqs[0].Context() == reqs[1].Context() {
		t.Error("two attempts shared a request copy or a context")
	}
	if err := reqs[0].Context().Err(); err != context.Canceled {
		t.Errorf("the first attempt's context: Err() = %v once the second began, want %v", err, context.Canceled)
	}
}

// TestWatchedAttemptEndsBeforeTheNext: an attempt something watched (here a
// context derived from it, and a clean-up registered on it) is over before
// the next attempt begins, which then has a context of its own.
func TestWatchedAttemptEndsBeforeTheNext(t *testing.T) {
	t.Parallel()
	var cleanups atomic.Int32
	var kids, actxs []context.Context
	var openAtNext []bool
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		for _, kid := range kids {
			openAtNext = append(openAtNext, kid.Err() == nil)
		}
		actxs = append(actxs, req.Context())
		kid, stop := context.WithCancel(req.Context())
		t.Cleanup(stop)
		kids = append(kids, kid)
		context.AfterFunc(req.Context(), func() { cleanups.Add(1) })
		code := 503
		if len(kids) == 3 {
			code = 200
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Request: req,
			Body: io.NopCloser(strings.NewReader("x"))}, nil
	}), Policy{Sleep: func(context.Context, time.Duration) error {
		// The clean-ups run in their own goroutines: let them finish.
		for deadline := time.Now().Add(hang); cleanups.Load() < int32(len(kids)); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("the clean-up of the last attempt never ran")
			}
		}
		return nil
	}})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !slices.Equal(openAtNext, []bool{false, false, false}) {
		t.Errorf("derived contexts of earlier attempts open when the next began: %v, want none", openAtNext)
	}
	if actxs[0] == actxs[1] || actxs[1] == actxs[2] {
		t.Error("watched attempts shared a context")
	}
}

// TestAttemptReleasedWhenCallEnds: the last attempt's context is released
// however the call ends, so nothing tied to it outlives the call.
func TestAttemptReleasedWhenCallEnds(t *testing.T) {
	t.Parallel()
	errSleep := errors.New("sleep failed")
	tests := []struct {
		name  string
		codes []int
		p     Policy
		ok    bool // the call returns a response
	}{
		{name: "sleep fails", codes: []int{503}, p: Policy{Sleep: func(context.Context, time.Duration) error { return errSleep }}},
		{name: "attempts run out", codes: []int{503}, p: Policy{MaxAttempts: 3, Sleep: noWait}, ok: true},
		{name: "success", codes: []int{503, 503, 200}, p: Policy{Sleep: noWait}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			base := &ctxBase{codes: tt.codes, derive: true}
			defer func() {
				for _, stop := range base.stops {
					stop()
				}
			}()
			tr := NewTransport(base, tt.p)
			req := newRequest(t, http.MethodGet, "http://api.example/", nil).WithContext(parent)
			resp, err := tr.RoundTrip(req)
			if (err == nil) != tt.ok {
				t.Fatalf("RoundTrip error = %v, want ok = %v", err, tt.ok)
			}
			if resp != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			reqs := base.attempts()
			if err := reqs[len(reqs)-1].Context().Err(); err != context.Canceled {
				t.Errorf("attempt context Err() = %v after the call, want %v", err, context.Canceled)
			}
			for i, kid := range base.kids {
				if !closedWithin(kid.Done(), hang) {
					t.Errorf("context derived from attempt %d still open after the call", i+1)
				}
			}
			if parent.Err() != nil {
				t.Error("the caller's context was cancelled")
			}
		})
	}
}

// TestBodyRequestsGetAFreshCopy: a request with a body gets a new copy per
// attempt, so the body the base of an earlier attempt may still read is
// never swapped under it.
func TestBodyRequestsGetAFreshCopy(t *testing.T) {
	t.Parallel()
	base := &ctxBase{codes: []int{503, 200}}
	tr := NewTransport(base, Policy{Sleep: noWait})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodPut, "http://api.example/", strings.NewReader("payload")))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	reqs := base.attempts()
	if len(reqs) != 2 || reqs[0] == reqs[1] || reqs[0].Body == reqs[1].Body {
		t.Errorf("%d attempts; want 2 with their own request copies and bodies", len(reqs))
	}
}

// TestRetriedStatusErrorsStayWhole: a *StatusError handed to OnRetry or to
// Policy.Retryable is never changed afterwards; the error a call ends with
// describes the last status.
func TestRetriedStatusErrorsStayWhole(t *testing.T) {
	t.Parallel()
	var seen []error
	hooks := map[string]func(*Policy){
		"OnRetry": func(p *Policy) { p.OnRetry = func(e Event) { seen = append(seen, e.Err) } },
		"Retryable": func(p *Policy) {
			p.Retryable = func(err error) bool { seen = append(seen, err); return IsRetryable(err) }
		},
		"neither": func(*Policy) {},
	}
	for name, hook := range hooks {
		t.Run(name, func(t *testing.T) {
			seen = nil
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sleeps := 0
			p := Policy{Sleep: func(context.Context, time.Duration) error {
				if sleeps++; sleeps == 3 {
					cancel() // the caller gives up during the third sleep
				}
				return nil
			}}
			hook(&p)
			base := &ctxBase{codes: []int{503, 502, 504}}
			req := newRequest(t, http.MethodGet, "http://api.example/", nil).WithContext(ctx)
			_, err := NewTransport(base, p).RoundTrip(req)
			se, ok := errors.AsType[*StatusError](err)
			if !ok || se.StatusCode != 504 || !errors.Is(err, context.Canceled) {
				t.Fatalf("RoundTrip error = %v, want context.Canceled wrapping the 504", err)
			}
			var codes []int
			for _, e := range seen {
				codes = append(codes, e.(*StatusError).StatusCode)
			}
			if name != "neither" && !slices.Equal(codes, []int{503, 502, 504}) {
				t.Errorf("%s saw statuses %v, want [503 502 504] each kept as it was", name, codes)
			}
		})
	}
}

// emptyBody returns neither bytes nor an error, forever.
type emptyBody struct{ reads, closes int }

func (b *emptyBody) Read([]byte) (int, error) { b.reads++; return 0, nil }
func (b *emptyBody) Close() error             { b.closes++; return nil }

// TestGivesUpOnEmptyReads: a discarded body whose reads never return
// anything is closed rather than read forever, and so is one peeked at for
// Policy.Retryable.
func TestGivesUpOnEmptyReads(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		p    Policy
	}{
		{name: "drain", p: Policy{Sleep: noWait}},
		{name: "peek and drain", p: Policy{Sleep: noWait, Retryable: IsRetryable}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := new(emptyBody)
			calls := 0
			tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				calls++
				if calls == 1 {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: body, ContentLength: -1, Request: req}, nil
				}
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
			}), tt.p)
			done := make(chan struct{})
			var resp *http.Response
			var err error
			go func() {
				defer close(done)
				resp, err = tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
			}()
			if !closedWithin(done, hang) {
				t.Fatal("RoundTrip still reading a body that returns nothing")
			}
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("RoundTrip = %v, %v; want the 200 of the retry", resp, err)
			}
			if body.closes != 1 || body.reads > 1000 {
				t.Errorf("empty body read %d times and closed %d; want few reads and one close", body.reads, body.closes)
			}
		})
	}
}

// TestBodyWriteToReleases: io.Copy from a returned body goes through the
// body's own shortcut and still releases the attempt at the end.
func TestBodyWriteToReleases(t *testing.T) {
	t.Parallel()
	var actx context.Context
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		actx = req.Context()
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req,
			Body: io.NopCloser(strings.NewReader("payload"))}, nil
	}), Policy{})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, ok := resp.Body.(io.WriterTo); !ok {
		t.Fatalf("body %T has no WriteTo", resp.Body)
	}
	var got strings.Builder
	if n, err := io.Copy(&got, resp.Body); err != nil || n != 7 || got.String() != "payload" {
		t.Fatalf("io.Copy = %d, %v, %q; want 7, nil, payload", n, err, got.String())
	}
	if err := actx.Err(); err != context.Canceled {
		t.Errorf("attempt Err() = %v after the body was copied to its end, want %v", err, context.Canceled)
	}
}

// TestLateErrorJudgedAlikeWithCustomRetryable: a 404 from a base that never
// watches its context, arriving after the attempt timeout, is handed back
// with or without a custom Policy.Retryable: nothing cut its body.
func TestLateErrorJudgedAlikeWithCustomRetryable(t *testing.T) {
	t.Parallel()
	for _, custom := range []bool{false, true} {
		calls := 0
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			time.Sleep(30 * time.Millisecond)
			return &http.Response{StatusCode: 404, Header: http.Header{}, ContentLength: 2,
				Body: io.NopCloser(strings.NewReader("no")), Request: req}, nil
		})
		p := Policy{AttemptTimeout: 10 * time.Millisecond, MaxAttempts: 3, Sleep: noWait}
		if custom {
			p.Retryable = IsRetryable
		}
		resp, err := NewTransport(base, p).RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
		if err != nil || resp.StatusCode != 404 || calls != 1 {
			t.Errorf("custom Retryable %v: %d calls, error %v; want the 404 after one call", custom, calls, err)
			continue
		}
		if got := readAll(t, resp); got != "no" {
			t.Errorf("custom Retryable %v: body %q, want it whole", custom, got)
		}
	}
}
