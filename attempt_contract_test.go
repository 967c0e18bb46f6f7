package retry

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestEveryAttemptSeesTheCallersContext: a client trace and a value the
// caller put in the request's context reach every attempt, over a real
// connection, and each attempt's Deadline is its own.
func TestEveryAttemptSeesTheCallersContext(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	type key struct{}
	var mu sync.Mutex
	var deadlines []time.Time
	var values []any
	watch := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		d, _ := req.Context().Deadline()
		mu.Lock()
		deadlines, values = append(deadlines, d), append(values, req.Context().Value(key{}))
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // so that the next attempt begins later
		return base.RoundTrip(req)
	})
	var gotConns atomic.Int32
	ctx := httptrace.WithClientTrace(context.WithValue(context.Background(), key{}, "caller's"),
		&httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConns.Add(1) }})
	req := newRequest(t, http.MethodGet, srv.URL, nil).WithContext(ctx)
	resp, err := NewTransport(watch, Policy{AttemptTimeout: time.Hour, Deadline: 2 * time.Hour, Sleep: noWait}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = readAll(t, resp)
	if gotConns.Load() != 3 {
		t.Errorf("the caller's GotConn hook ran %d times, want once per attempt: 3", gotConns.Load())
	}
	for i, v := range values {
		if v != "caller's" {
			t.Errorf("attempt %d: Value = %v, want the caller's", i+1, v)
		}
	}
	for i := 1; i < len(deadlines); i++ {
		if !deadlines[i].After(deadlines[i-1]) {
			t.Errorf("attempt %d's deadline %v is not after attempt %d's %v: not its own",
				i+1, deadlines[i], i, deadlines[i-1])
		}
	}
}

// TestDerivedContextsBehaveAsStandard: contexts derived from an attempt
// behave as if derived from a standard context: a WithTimeout child ends
// with the attempt's timeout, with its error; WithoutCancel keeps values
// and never ends; context.AfterFunc runs once unless stopped in time.
func TestDerivedContextsBehaveAsStandard(t *testing.T) {
	t.Parallel()
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	c := newAttempt(parent, 20*time.Millisecond)
	defer c.release()
	child, cancel := context.WithTimeout(c, time.Hour)
	defer cancel()
	detached := context.WithoutCancel(c)
	var ran, stoppedRan atomic.Int32
	context.AfterFunc(c, func() { ran.Add(1) })
	stop := context.AfterFunc(c, func() { stoppedRan.Add(1) })
	if !stop() {
		t.Error("stop() = false before the attempt ended")
	}
	waitClosed(t, child.Done())
	if err := child.Err(); err != context.DeadlineExceeded {
		t.Errorf("child Err() = %v, want %v, as from a context.WithTimeout parent", err, context.DeadlineExceeded)
	}
	if err := context.Cause(child); err != context.DeadlineExceeded {
		t.Errorf("child Cause() = %v, want %v", err, context.DeadlineExceeded)
	}
	if d, _ := child.Deadline(); !d.Equal(c.deadline) {
		t.Errorf("child Deadline() = %v, want the attempt's %v", d, c.deadline)
	}
	if detached.Err() != nil || detached.Done() != nil || detached.Value(key{}) != "v" {
		t.Error("WithoutCancel: want no cancellation and the parent's values")
	}
	for deadline := time.Now().Add(hang); ran.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // a second run, if any, would come now
	if ran.Load() != 1 || stoppedRan.Load() != 0 {
		t.Errorf("AfterFunc ran %d times and the stopped one %d; want 1 and 0", ran.Load(), stoppedRan.Load())
	}
}

// TestErrAndDoneAgree reads Err and Done from many goroutines while the
// attempt ends every way: Err is never set while Done is open, and never
// nil once it is closed.
func TestErrAndDoneAgree(t *testing.T) {
	t.Parallel()
	for i := range 300 {
		parent, cancel := context.WithCancel(context.Background())
		c := newAttempt(parent, time.Duration(rand.IntN(300))*time.Microsecond)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 200 {
					err, closed := c.Err(), isClosed(c.Done())
					if err != nil && !closed {
						t.Errorf("round %d: Err() = %v while Done is open", i, err)
						return
					}
					if closed && c.Err() == nil {
						t.Errorf("round %d: Err() = nil after Done closed", i)
						return
					}
				}
			})
		}
		switch i % 3 {
		case 0:
			wg.Go(c.release)
		case 1:
			wg.Go(cancel)
		}
		wg.Wait()
		c.release()
		cancel()
	}
}

// TestEarlierTimerNeverCutsALaterAttempt: a base that keeps the request's
// context after RoundTrip returned (as HTTP/2 does for its stream) sees
// each attempt end on its own; the second attempt, which outlives the
// first one's deadline, is not cut by it.
func TestEarlierTimerNeverCutsALaterAttempt(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	var kept []context.Context
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		kept = append(kept, req.Context())
		if len(kept) == 1 {
			time.Sleep(timeout / 2)
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		}
		// Runs past the first attempt's deadline, watching its own context.
		select {
		case <-req.Context().Done():
			return nil, context.Cause(req.Context())
		case <-time.After(timeout * 3 / 4):
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}), Policy{AttemptTimeout: timeout, Sleep: noWait})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip = %v, %v; want the 200 of the second attempt", resp, err)
	}
	if err := kept[0].Err(); err != context.Canceled {
		t.Errorf("the first attempt's context: Err() = %v, want %v: released, not timed out", err, context.Canceled)
	}
}

// failWriter fails every write.
type failWriter struct{}

var errWrite = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

// TestBodyBehavesAsNetHTTP drives a response body through each order of
// Read, Close, cancel and io.Copy (into a failing writer and a good one),
// bare and through the Transport, and compares what each step returns.
func TestBodyBehavesAsNetHTTP(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Larger than any buffer on the way, so that a cancel always
		// finds bytes still to come.
		_, _ = io.WriteString(w, strings.Repeat("x", 2<<20))
	}))
	defer srv.Close()
	steps := map[string]func(body io.ReadCloser, cancel context.CancelFunc) string{
		"read": func(b io.ReadCloser, _ context.CancelFunc) string {
			_, err := b.Read(make([]byte, 10))
			return errClass(err)
		},
		"readall": func(b io.ReadCloser, _ context.CancelFunc) string { _, err := io.ReadAll(b); return errClass(err) },
		"close":   func(b io.ReadCloser, _ context.CancelFunc) string { return errClass(b.Close()) },
		"cancel": func(_ io.ReadCloser, cancel context.CancelFunc) string {
			cancel()
			time.Sleep(10 * time.Millisecond) // net/http acts on a cancel in its own goroutines
			return ""
		},
		"copyfail": func(b io.ReadCloser, _ context.CancelFunc) string {
			_, err := io.Copy(failWriter{}, b)
			return errClass(err)
		},
		"copy": func(b io.ReadCloser, _ context.CancelFunc) string {
			_, err := io.Copy(io.Discard, b)
			return errClass(err)
		},
	}
	orders := [][]string{
		{"read", "close", "read"}, {"readall", "close", "read"}, {"close", "read"}, {"cancel", "read", "close"},
		{"read", "cancel", "readall"}, {"copyfail", "read", "close"}, {"copyfail", "copy", "close"},
		{"copy", "copy", "close", "close"}, {"close", "copy"}, {"cancel", "copy"},
	}
	run := func(rt http.RoundTripper, order []string) []string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := rt.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range order {
			got = append(got, s+":"+steps[s](resp.Body, cancel))
		}
		_ = resp.Body.Close()
		return got
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	for _, order := range orders {
		want := run(base, order)
		got := run(NewTransport(base, Policy{}), order)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("order %v: through the Transport %v, bare %v", order, got, want)
		}
	}
}

// errClass names an error by what a caller tests it for.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, io.EOF):
		return "EOF"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, errWrite):
		return "writefailed"
	case strings.Contains(err.Error(), "closed"):
		return "closed"
	}
	return "other: " + err.Error()
}

// TestWriteToReleasesOnce: io.Copy through the body's WriteTo releases the
// attempt at the end of the body, once; the Close after it is harmless.
func TestWriteToReleasesOnce(t *testing.T) {
	t.Parallel()
	var closes atomic.Int32
	body := &countClose{Reader: strings.NewReader("payload"), n: &closes}
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: body, Request: req}, nil
	}), Policy{})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatal(err)
	}
	actx := resp.Request.Context()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := actx.Err(); err != context.Canceled {
		t.Errorf("attempt Err() = %v after io.Copy to the end, want %v", err, context.Canceled)
	}
	_ = resp.Body.Close()
	_ = resp.Body.Close()
	if closes.Load() != 2 {
		t.Errorf("the base's body closed %d times, want each Close passed on once: 2", closes.Load())
	}
}

type countClose struct {
	io.Reader
	n *atomic.Int32
}

func (c *countClose) Close() error { c.n.Add(1); return nil }

// TestThousandsOfCallersWithRandomCancels: thousands of goroutines share
// one Transport over a base that watches each attempt's context, and
// callers cancel at random moments. Every call ends as success, a
// retryable status handed back, or an error matching the caller's
// cancellation; nothing is left running.
func TestThousandsOfCallersWithRandomCancels(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var calls atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := calls.Add(1)
		select {
		case <-req.Context().Done():
			return nil, context.Cause(req.Context())
		case <-time.After(time.Duration(n%5) * 100 * time.Microsecond):
		}
		code := 200
		if n%3 == 0 {
			code = 503
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Request: req,
			Body: io.NopCloser(strings.NewReader("body"))}, nil
	})
	tr := NewTransport(base, Policy{AttemptTimeout: time.Millisecond, Base: time.Microsecond, Cap: time.Microsecond})
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 3000 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%2 == 0 {
				time.AfterFunc(time.Duration(rand.IntN(2000))*time.Microsecond, cancel)
			}
			resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil).WithContext(ctx))
			switch {
			case err == nil:
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			case ctx.Err() != nil && errors.Is(err, context.Canceled):
			case errors.Is(err, context.DeadlineExceeded): // every attempt timed out
			default:
				if bad.Add(1) < 5 {
					t.Errorf("call %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
}
