package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/retrytest"
)

// hang is far longer than any attempt timeout in these tests: an attempt
// that took this long was not cut by its timeout.
const hang = 10 * time.Second

// pastDeadline waits, without sleeping, until c's deadline has passed.
func pastDeadline(t *testing.T, c *attemptCtx) {
	t.Helper()
	for stop := time.Now().Add(hang); time.Now().Before(c.deadline); {
		if time.Now().After(stop) {
			t.Fatal("the deadline never passed")
		}
		runtime.Gosched()
	}
}

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	return waitUntil(context.Background(), ch, time.Now().Add(d))
}

// TestAttemptTimeout checks that an attempt's timeout ends it, whether or
// not anything waits on its Done channel, as a context.WithTimeout context
// ends: Err and Cause say context.DeadlineExceeded once Done is closed.
func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	c := newAttempt(context.Background(), 20*time.Millisecond)
	defer c.release()
	pastDeadline(t, c)
	for stop := time.Now().Add(hang); c.Err() == nil && time.Now().Before(stop); {
		runtime.Gosched()
	}
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err() = %v, want %v", err, context.DeadlineExceeded)
	}
	if err := context.Cause(c); err != context.DeadlineExceeded {
		t.Errorf("Cause() = %v, want %v", err, context.DeadlineExceeded)
	}
	if !c.timedOut() {
		t.Error("timedOut() = false, want true")
	}
	if !isClosed(c.Done()) {
		t.Error("Done is open after the timeout")
	}
}

// TestAttemptLateDone checks that asking for Done after the deadline passed,
// with nothing watching before, gives a channel that is closed, or soon is.
func TestAttemptLateDone(t *testing.T) {
	c := newAttempt(context.Background(), time.Microsecond)
	defer c.release()
	pastDeadline(t, c)
	if !closedWithin(c.Done(), hang) {
		t.Fatal("Done is open after the deadline passed")
	}
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err() = %v, want %v", err, context.DeadlineExceeded)
	}
}

// TestAttemptStopTimeout checks that a timeout switched off (the response
// headers arrived) never ends the attempt, watched or not, and that Deadline
// then reports the parent's deadline only.
func TestAttemptStopTimeout(t *testing.T) {
	tests := []struct {
		name  string
		watch bool
	}{
		{name: "watched", watch: true},
		{name: "unwatched", watch: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Long enough that stopTimeout comes first even on a loaded machine.
			c := newAttempt(context.Background(), 200*time.Millisecond)
			defer c.release()
			var done <-chan struct{}
			if tt.watch {
				done = c.Done()
			}
			if !c.stopTimeout() {
				t.Fatal("stopTimeout() = false on a live attempt")
			}
			pastDeadline(t, c)
			if done == nil {
				done = c.Done()
			}
			if closedWithin(done, 50*time.Millisecond) {
				t.Error("Done was closed by a timeout that was switched off")
			}
			if err := c.Err(); err != nil {
				t.Errorf("Err() = %v, want nil", err)
			}
			if c.timedOut() {
				t.Error("timedOut() = true after stopTimeout")
			}
			if d, ok := c.Deadline(); ok {
				t.Errorf("Deadline() = %v, true; want none after stopTimeout", d)
			}
		})
	}
}

// TestAttemptStopTimeoutAfterExpiry checks that stopTimeout reports an
// attempt its timeout already ended.
func TestAttemptStopTimeoutAfterExpiry(t *testing.T) {
	c := newAttempt(context.Background(), time.Millisecond)
	defer c.release()
	if !closedWithin(c.Done(), hang) {
		t.Fatal("Done was not closed by the attempt timeout")
	}
	if c.stopTimeout() {
		t.Error("stopTimeout() = true after the timeout fired")
	}
}

// TestAttemptParent checks that the caller's context ends the attempt, with
// the caller's error, and that this is not taken for the attempt's timeout.
func TestAttemptParent(t *testing.T) {
	tests := []struct {
		name  string
		watch bool
	}{
		{name: "watched", watch: true},
		{name: "unwatched", watch: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent, cancel := context.WithCancel(context.Background())
			c := newAttempt(parent, hang)
			defer c.release()
			var done <-chan struct{}
			if tt.watch {
				done = c.Done()
			}
			cancel()
			if done != nil && !closedWithin(done, hang) {
				t.Fatal("Done was not closed when the parent was canceled")
			}
			if err := c.Err(); err != context.Canceled {
				t.Errorf("Err() = %v, want %v", err, context.Canceled)
			}
			if c.timedOut() {
				t.Error("timedOut() = true for a canceled parent")
			}
		})
	}
}

// TestAttemptDeadline checks that Deadline reports the sooner of the
// attempt's and the parent's deadlines.
func TestAttemptDeadline(t *testing.T) {
	soon, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parentDeadline, _ := soon.Deadline()
	tests := []struct {
		name    string
		parent  context.Context
		timeout time.Duration
		parents bool // the parent's deadline is the sooner
	}{
		{name: "no parent deadline", parent: context.Background(), timeout: time.Second},
		{name: "attempt sooner", parent: soon, timeout: time.Second},
		{name: "parent sooner", parent: soon, timeout: time.Hour, parents: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newAttempt(tt.parent, tt.timeout)
			defer c.release()
			want := c.deadline
			if tt.parents {
				want = parentDeadline
			}
			if got, ok := c.Deadline(); !ok || !got.Equal(want) {
				t.Errorf("Deadline() = %v, %v; want %v, true", got, ok, want)
			}
		})
	}
}

// TestAttemptDerived checks that contexts derived from an attempt, as
// net/http derives one per request, end with it, and that they are tied to
// it through AfterFunc rather than by a goroutine each.
func TestAttemptDerived(t *testing.T) {
	const n = 200
	before := runtime.NumGoroutine()
	attempts := make([]*attemptCtx, n)
	children := make([]context.Context, n)
	for i := range attempts {
		attempts[i] = newAttempt(context.Background(), hang)
		var cancel context.CancelCauseFunc
		children[i], cancel = context.WithCancelCause(attempts[i])
		defer cancel(nil)
	}
	if extra := runtime.NumGoroutine() - before; extra >= n/2 {
		t.Errorf("%d goroutines for %d derived contexts, want far fewer", extra, n)
	}
	for i, c := range attempts {
		c.release()
		if !closedWithin(children[i].Done(), hang) {
			t.Fatalf("derived context %d still open after its attempt ended", i)
		}
		if err := children[i].Err(); err != context.Canceled {
			t.Errorf("derived context %d: Err() = %v, want %v", i, err, context.Canceled)
		}
	}
}

// TestAttemptAfterFunc checks the context.AfterFunc contract through
// attemptCtx's AfterFunc method: a function stopped in time never runs, one
// still registered runs once the attempt ends, and one registered after the
// end runs at once.
func TestAttemptAfterFunc(t *testing.T) {
	tests := []struct {
		name        string
		stopFirst   bool // stop before the attempt ends
		registerEnd bool // register after the attempt ended
		wantStop    bool // what stop reports
		wantRun     bool
	}{
		{name: "stopped in time", stopFirst: true, wantStop: true, wantRun: false},
		{name: "runs at the end", wantStop: false, wantRun: true},
		{name: "registered after the end", registerEnd: true, wantStop: false, wantRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newAttempt(context.Background(), hang)
			// A second registration takes the other path of AfterFunc.
			var other atomic.Bool
			otherStop := c.AfterFunc(func() { other.Store(true) })
			if tt.registerEnd {
				c.release()
			}
			ran := make(chan struct{})
			stop := context.AfterFunc(c, func() { close(ran) })
			var stopped bool
			if tt.stopFirst {
				stopped = stop()
			}
			c.release()
			if !tt.stopFirst {
				if !closedWithin(ran, hang) {
					t.Fatal("the function never ran after the attempt ended")
				}
				stopped = stop()
			}
			if stopped != tt.wantStop {
				t.Errorf("stop() = %v, want %v", stopped, tt.wantStop)
			}
			if got := closedWithin(ran, 20*time.Millisecond); got != tt.wantRun {
				t.Errorf("ran = %v, want %v", got, tt.wantRun)
			}
			if otherStop() {
				t.Error("the second registration's stop() = true after the attempt ended")
			}
			for deadline := time.Now().Add(hang); !other.Load(); {
				if time.Now().After(deadline) {
					t.Fatal("the second registration never ran")
				}
				runtime.Gosched()
			}
		})
	}
}

// TestDoAttemptTimeoutWatchedOrPolled checks Do's attempt timeout both for a function that
// waits on Done and for one that only polls Err.
func TestDoAttemptTimeoutWatchedOrPolled(t *testing.T) {
	tests := []struct {
		name string
		fn   func(ctx context.Context) (int, error)
	}{
		{name: "waits on Done", fn: func(ctx context.Context) (int, error) {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(hang):
				return 1, nil
			}
		}},
		{name: "polls Err", fn: func(ctx context.Context) (int, error) {
			for stop := time.Now().Add(hang); time.Now().Before(stop); runtime.Gosched() {
				if err := ctx.Err(); err != nil {
					return 0, err
				}
			}
			return 1, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			p := Policy{MaxAttempts: 2, AttemptTimeout: 20 * time.Millisecond, Sleep: func(context.Context, time.Duration) error { return nil }}
			_, err := Do(context.Background(), p, tt.fn)
			var e *Error
			if !errors.As(err, &e) || e.Attempts != 2 || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Do() = %v, want *Error after 2 attempts wrapping context.DeadlineExceeded", err)
			}
			if took := time.Since(start); took > hang/2 {
				t.Errorf("Do took %v: the attempt timeout did not cut the attempts", took)
			}
		})
	}
}

// TestTransportAttemptTimeoutLoopback checks that the attempt timeout still
// cuts a real round trip that hangs before its headers.
func TestTransportAttemptTimeoutLoopback(t *testing.T) {
	srv := retrytest.NewServer(t, retrytest.Step{Hang: true}, retrytest.Step{})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	c := &http.Client{Transport: NewTransport(base, Policy{
		AttemptTimeout: 50 * time.Millisecond,
		Sleep:          func(context.Context, time.Duration) error { return nil },
	})}
	start := time.Now()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || srv.Requests() != 2 {
		t.Errorf("status %d after %d requests, want 200 after 2", resp.StatusCode, srv.Requests())
	}
	if took := time.Since(start); took > hang/2 {
		t.Errorf("took %v: the hung attempt was not cut by its timeout", took)
	}
}

// hideAfterFunc hides attemptCtx's AfterFunc method from the context
// package, as if it had none.
type hideAfterFunc struct{ context.Context }

// BenchmarkAttemptDerived measures what net/http does with every attempt's
// context: derive a cancelable context from it, and cancel that when the
// response is done. With AfterFunc the derived context is registered with
// the attempt; without it, the context package starts a goroutine per
// derived context to watch the attempt.
func BenchmarkAttemptDerived(b *testing.B) {
	errDone := errors.New("request done")
	for _, hide := range []bool{false, true} {
		name := "afterfunc"
		if hide {
			name = "goroutine"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x := new(exchange)
				x.ctx.start(context.Background(), 1, time.Time{}, time.Minute)
				var ctx context.Context = &x.ctx
				if hide {
					ctx = hideAfterFunc{ctx}
				}
				_, cancel := context.WithCancelCause(ctx)
				cancel(errDone)
				x.ctx.stopTimeout()
				x.ctx.release()
			}
		})
	}
}
