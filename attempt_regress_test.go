package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stalledBase answers its first attempt with status code and a body that
// never delivers a byte and ignores every context (an io.Pipe whose writer
// is stuck); later attempts get a 200. It records whether that body was
// closed.
type stalledBase struct {
	code   int
	calls  atomic.Int32
	closed atomic.Bool
}

type closeRecorder struct {
	*io.PipeReader
	closed *atomic.Bool
}

func (r closeRecorder) Close() error { r.closed.Store(true); return r.PipeReader.Close() }

func (b *stalledBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.calls.Add(1) == 1 {
		r, _ := io.Pipe()
		return &http.Response{StatusCode: b.code, Header: http.Header{}, ContentLength: -1, Request: req,
			Body: closeRecorder{PipeReader: r, closed: &b.closed}}, nil
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// TestStalledBodyNeverHoldsTheCall: a discarded 503 whose body stalls
// without watching the request's context (drained), and the same body
// peeked at for a custom Policy.Retryable, are closed when the attempt's
// timeout passes, so the call goes on to its next attempt; and a cancel by
// the caller during the drain returns within 50 ms.
func TestStalledBodyNeverHoldsTheCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy Policy
		cancel bool // the caller cancels during the drain
	}{
		{name: "drain", policy: Policy{AttemptTimeout: 100 * time.Millisecond, Sleep: noWait}},
		{name: "peek", policy: Policy{AttemptTimeout: 100 * time.Millisecond, Sleep: noWait, Retryable: IsRetryable}},
		{name: "deadline", policy: Policy{Deadline: 100 * time.Millisecond, Base: time.Millisecond, Sleep: noWait}},
		{name: "caller cancels", policy: Policy{Sleep: noWait}, cancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := &stalledBase{code: 503}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := NewTransport(base, tt.policy).RoundTrip(
					newRequest(t, http.MethodGet, "http://api.example/", nil).WithContext(ctx))
				done <- result{resp, err}
			}()
			var canceled time.Time
			if tt.cancel {
				time.Sleep(50 * time.Millisecond) // the drain has begun
				canceled = time.Now()
				cancel()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(hang):
				t.Fatal("RoundTrip still held by a stalled body")
			}
			if !base.closed.Load() {
				t.Error("the stalled body was never closed")
			}
			switch {
			case tt.cancel:
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("RoundTrip error = %v, want one matching context.Canceled", r.err)
				}
				if took := time.Since(canceled); took > time.Second {
					t.Errorf("returned %v after the cancel, want within 50 ms (a second with margin)", took)
				}
			case tt.name == "deadline":
				if _, ok := errors.AsType[*Error](r.err); !ok || r.resp != nil {
					t.Errorf("RoundTrip = %v, %v; want a *Error: the Deadline passed during the drain", r.resp, r.err)
				}
			default:
				if r.err != nil || r.resp.StatusCode != 200 || base.calls.Load() != 2 {
					t.Errorf("RoundTrip = %v, %v after %d attempts; want the 200 of the second", r.resp, r.err, base.calls.Load())
				}
			}
		})
	}
}

// cutBody returns its bytes together with io.ErrUnexpectedEOF, then io.EOF,
// as io.Reader allows: a body cut short.
type cutBody struct{ read bool }

func (b *cutBody) Read(p []byte) (int, error) {
	if b.read {
		return 0, io.EOF
	}
	b.read = true
	return copy(p, `{"error":`), io.ErrUnexpectedEOF
}
func (b *cutBody) Close() error { return nil }

// TestPeekKeepsTheReadError: the start of an error body read for
// Policy.Retryable is followed, for whoever reads the response, by the
// error the peek met: a cut body never reads as whole.
func TestPeekKeepsTheReadError(t *testing.T) {
	t.Parallel()
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 400, Header: http.Header{}, ContentLength: -1, Request: req, Body: &cutBody{}}, nil
	}), Policy{Retryable: LLMRetryable})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if string(body) != `{"error":` || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body %q, error %v; want the peeked bytes, then io.ErrUnexpectedEOF", body, err)
	}
}

// TestCauseAgreesWithErr: after the attempt's own timeout, a later cancel
// of the caller's context with a cause changes neither Err nor Cause of
// the attempt's context, as with a context.WithTimeout child; a cancel of
// the caller's context first shows its cause.
func TestCauseAgreesWithErr(t *testing.T) {
	t.Parallel()
	errCaller := errors.New("caller gave up")
	t.Run("timeout first", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithCancelCause(context.Background())
		c := newAttempt(parent, time.Millisecond)
		defer c.release()
		waitClosed(t, c.Done())
		cancel(errCaller)
		if err, cause := c.Err(), context.Cause(c); err != context.DeadlineExceeded || cause != context.DeadlineExceeded {
			t.Errorf("Err() = %v, Cause() = %v; want both %v", err, cause, context.DeadlineExceeded)
		}
	})
	t.Run("caller first", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithCancelCause(context.Background())
		c := newAttempt(parent, hang)
		defer c.release()
		cancel(errCaller)
		waitClosed(t, c.Done())
		if err, cause := c.Err(), context.Cause(c); err != context.Canceled || cause != errCaller {
			t.Errorf("Err() = %v, Cause() = %v; want %v, %v", err, cause, context.Canceled, errCaller)
		}
	})
	t.Run("released", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithCancelCause(context.Background())
		c := newAttempt(parent, hang)
		c.release()
		cancel(errCaller)
		if err, cause := c.Err(), context.Cause(c); err != context.Canceled || cause != context.Canceled {
			t.Errorf("Err() = %v, Cause() = %v; want both %v", err, cause, context.Canceled)
		}
	})
}

// TestClientTimeoutAddsNoGoroutinePerAttempt: http.Client sets
// Request.Cancel when its Timeout is set and the Transport is not its own.
// The attempts never carry it on, so net/http starts no goroutine per
// attempt to watch it; the cancellation travels in the context.
func TestClientTimeoutAddsNoGoroutinePerAttempt(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	var cancels atomic.Int32
	watch := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		//lint:ignore SA1019 what the test checks
		if req.Cancel != nil {
			cancels.Add(1)
		}
		return base.RoundTrip(req)
	})
	const n = 20
	count := func(rt http.RoundTripper) int {
		c := &http.Client{Transport: rt, Timeout: hang}
		before := runtime.NumGoroutine()
		arrived.Store(0)
		for range n {
			go func() {
				if resp, err := c.Get(srv.URL); err == nil {
					resp.Body.Close()
				}
			}()
		}
		for deadline := time.Now().Add(hang); arrived.Load() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // let the goroutines of each request start
		return runtime.NumGoroutine() - before
	}
	bare := count(base)
	retried := count(NewTransport(watch, Policy{}))
	if cancels.Load() != 0 {
		t.Errorf("%d attempts carried Request.Cancel to the base, want none", cancels.Load())
	}
	// Each request through an unknown Transport costs http.Client one
	// goroutine of its own to run its Timeout; the retry layer adds none.
	if extra := retried - bare; extra > n+n/4 {
		t.Errorf("%d goroutines for %d requests in flight, %d bare: %.1f more per request, want 1 (http.Client's own)",
			retried, n, bare, float64(extra)/n)
	}
}

// TestRequestCancelStillCancels: a request whose deprecated Cancel channel
// closes ends at once, though no attempt carries the channel on.
func TestRequestCancelStillCancels(t *testing.T) {
	t.Parallel()
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		//lint:ignore SA1019 what the test checks
		if req.Cancel != nil {
			t.Error("an attempt carried Request.Cancel")
		}
		<-req.Context().Done()
		return nil, context.Cause(req.Context())
	}), Policy{})
	cancel := make(chan struct{})
	req := newRequest(t, http.MethodGet, "http://api.example/", nil)
	req.Cancel = cancel //lint:ignore SA1019 the deprecated field is what the test sets
	time.AfterFunc(20*time.Millisecond, func() { close(cancel) })
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("RoundTrip error = %v, want the cancellation", err)
	}
	if took := time.Since(start); took > hang/2 {
		t.Errorf("took %v: Request.Cancel was not honoured", took)
	}
}
