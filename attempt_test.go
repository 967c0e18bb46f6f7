package retry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// waitClosed fails the test unless ch closes within seconds.
func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatal("channel not closed")
	}
}

// newAttempt starts an attempt context of at most timeout under parent;
// release it when done.
func newAttempt(parent context.Context, timeout time.Duration) *attemptCtx {
	c := new(attemptCtx)
	c.start(parent, 1, time.Time{}, timeout)
	return c
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func checkErr(t *testing.T, ctx context.Context, want error) {
	t.Helper()
	if got := ctx.Err(); got != want {
		t.Errorf("Err() = %v, want %v", got, want)
	}
}

func TestAttemptCtxRunning(t *testing.T) {
	t.Parallel()
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	before := time.Now()
	a := newAttempt(parent, time.Hour)
	after := time.Now()
	defer a.release()
	checkErr(t, a, nil)
	if isClosed(a.Done()) {
		t.Error("Done closed while the attempt runs")
	}
	dl, ok := a.Deadline()
	if !ok || dl.Before(before.Add(time.Hour)) || dl.After(after.Add(time.Hour)) {
		t.Errorf("Deadline() = %v, %v; want an hour from now", dl, ok)
	}
	if got := a.Value(key{}); got != "v" {
		t.Errorf("Value = %v, want the parent's", got)
	}
	if a.timedOut() {
		t.Error("timedOut() = true while the attempt runs")
	}
}

func TestAttemptCtxDeadline(t *testing.T) {
	t.Parallel()
	// Cleanup, not defer: the parallel subtests run after this function returns.
	soon, cancelSoon := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancelSoon)
	late, cancelLate := context.WithTimeout(context.Background(), 2*time.Hour)
	t.Cleanup(cancelLate)
	soonDL, _ := soon.Deadline()
	lateDL, _ := late.Deadline()
	tests := []struct {
		name     string
		parent   context.Context
		stop     bool      // switch the timeout off first
		want     time.Time // zero: the attempt's own, an hour from now
		wantNone bool
	}{
		{name: "parent sooner", parent: soon, want: soonDL},
		{name: "own sooner", parent: late},
		{name: "parent without deadline", parent: context.Background()},
		{name: "stopped: parent's", parent: late, stop: true, want: lateDL},
		{name: "stopped: none", parent: context.Background(), stop: true, wantNone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := time.Now()
			a := newAttempt(tt.parent, time.Hour)
			after := time.Now()
			defer a.release()
			if tt.stop && !a.stopTimeout() {
				t.Fatal("stopTimeout() = false on a live attempt")
			}
			dl, ok := a.Deadline()
			switch {
			case tt.wantNone:
				if ok {
					t.Errorf("Deadline() = %v, true; want none", dl)
				}
			case !tt.want.IsZero():
				if !ok || !dl.Equal(tt.want) {
					t.Errorf("Deadline() = %v, %v; want %v", dl, ok, tt.want)
				}
			default:
				if !ok || dl.Before(before.Add(time.Hour)) || dl.After(after.Add(time.Hour)) {
					t.Errorf("Deadline() = %v, %v; want an hour from now", dl, ok)
				}
			}
		})
	}
}

func TestAttemptCtxParentDone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		done    bool // ask for Done before the parent is cancelled
		errOnly bool // check Err before anything waits on Done
		early   bool // the parent is cancelled before the attempt starts
	}{
		{name: "Err without Done", errOnly: true},
		{name: "Done before cancel", done: true},
		{name: "Done after cancel"},
		{name: "parent already cancelled", early: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.early {
				cancel()
			}
			a := newAttempt(parent, time.Hour)
			defer a.release()
			var done <-chan struct{}
			if tt.done {
				done = a.Done()
			}
			cancel()
			if tt.errOnly {
				checkErr(t, a, context.Canceled)
			}
			if done == nil {
				done = a.Done()
			}
			waitClosed(t, done)
			checkErr(t, a, context.Canceled)
			if a.timedOut() {
				t.Error("timedOut() = true for a cancelled parent")
			}
			if a.stopTimeout() {
				t.Error("stopTimeout() = true for a cancelled parent")
			}
		})
	}
}

func TestAttemptCtxParentDeadline(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	a := newAttempt(parent, time.Hour)
	defer a.release()
	waitClosed(t, a.Done())
	checkErr(t, a, context.DeadlineExceeded)
	if a.timedOut() {
		t.Error("timedOut() = true when the parent's deadline, not the attempt's, passed")
	}
}

// TestAttemptCtxTimeoutAtOnce: a timeout that fires before newAttempt has
// returned must find the attempt fully set up (run with -race).
func TestAttemptCtxTimeoutAtOnce(t *testing.T) {
	t.Parallel()
	for range 1000 {
		a := newAttempt(context.Background(), time.Nanosecond)
		<-a.Done()
		if err := a.Err(); err != context.DeadlineExceeded {
			t.Fatalf("Err() = %v, want context.DeadlineExceeded", err)
		}
		a.release()
	}
}

func TestAttemptCtxTimeout(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAttempt(parent, 10*time.Millisecond)
	waitClosed(t, a.Done())
	checkErr(t, a, context.DeadlineExceeded)
	if !a.timedOut() {
		t.Error("timedOut() = false after the attempt's own timeout")
	}
	if a.stopTimeout() {
		t.Error("stopTimeout() = true after the timeout fired")
	}
	a.release()
	checkErr(t, a, context.DeadlineExceeded)
	checkErr(t, parent, nil)
}

func TestAttemptCtxStopTimeout(t *testing.T) {
	t.Parallel()
	for _, watch := range []bool{false, true} {
		// Long enough that stopTimeout comes first even on a loaded machine.
		a := newAttempt(context.Background(), 100*time.Millisecond)
		var done <-chan struct{}
		if watch {
			done = a.Done()
		}
		if !a.stopTimeout() {
			t.Fatal("stopTimeout() = false on a live attempt")
		}
		time.Sleep(250 * time.Millisecond) // well past the switched-off timeout
		checkErr(t, a, nil)
		if done == nil {
			done = a.Done()
		}
		if isClosed(done) {
			t.Error("Done closed after the timeout was switched off")
		}
		a.release()
		checkErr(t, a, context.Canceled)
		waitClosed(t, done)
		if a.timedOut() {
			t.Error("timedOut() = true for a released attempt")
		}
	}
}

func TestAttemptCtxStopTimeoutKeepsParent(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithCancel(context.Background())
	a := newAttempt(parent, time.Hour)
	defer a.release()
	done := a.Done()
	a.stopTimeout()
	cancel()
	waitClosed(t, done)
	checkErr(t, a, context.Canceled)
}

func TestAttemptCtxRelease(t *testing.T) {
	t.Parallel()
	a := newAttempt(context.Background(), time.Hour)
	done := a.Done()
	a.release()
	waitClosed(t, done)
	checkErr(t, a, context.Canceled)
	a.release() // a second release is harmless
	checkErr(t, a, context.Canceled)
	if !isClosed(a.Done()) {
		t.Error("Done not closed after release")
	}
}

func TestAttemptCtxChildren(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		end     func(a *attemptCtx, cancelParent context.CancelFunc)
		want    error
	}{
		{name: "release", timeout: time.Hour, end: func(a *attemptCtx, _ context.CancelFunc) { a.release() }, want: context.Canceled},
		{name: "parent cancel", timeout: time.Hour, end: func(_ *attemptCtx, c context.CancelFunc) { c() }, want: context.Canceled},
		{name: "timeout", timeout: 10 * time.Millisecond, end: func(*attemptCtx, context.CancelFunc) {}, want: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			a := newAttempt(parent, tt.timeout)
			defer a.release()
			child, cancelChild := context.WithCancel(a)
			defer cancelChild()
			grandchild, cancelGrandchild := context.WithTimeout(child, 2*time.Hour)
			defer cancelGrandchild()
			ran := make(chan struct{})
			stop := context.AfterFunc(a, func() { close(ran) })
			defer stop()
			want, _ := a.Deadline()
			if got, _ := grandchild.Deadline(); !got.Equal(want) {
				t.Errorf("a child's deadline = %v, want the attempt's %v", got, want)
			}
			tt.end(a, cancel)
			waitClosed(t, grandchild.Done())
			waitClosed(t, ran)
			checkErr(t, child, tt.want)
			checkErr(t, grandchild, tt.want)
		})
	}
}

// TestAttemptCtxConcurrent ends attempts (release, timeout, parent cancel)
// while other goroutines use them; run with -race.
func TestAttemptCtxConcurrent(t *testing.T) {
	t.Parallel()
	type key struct{}
	for i := range 40 {
		parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, i))
		a := newAttempt(parent, time.Duration(i%4)*time.Millisecond+time.Microsecond)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					_ = a.Err()
					_, _ = a.Deadline()
					_ = a.Value(key{})
					_ = isClosed(a.Done())
					_ = a.timedOut()
				}
			})
		}
		if i%2 == 0 {
			wg.Go(func() { a.stopTimeout() })
		}
		if i%3 == 0 {
			wg.Go(cancel)
		}
		wg.Go(a.release)
		wg.Wait()
		if err := a.Err(); !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("attempt %d: Err() = %v after release", i, err)
		}
		if !isClosed(a.Done()) {
			t.Errorf("attempt %d: Done not closed after release", i)
		}
		cancel()
	}
}

// TestAttemptCtxTimerNeverEndsALaterAttempt checks that a timer, once its
// attempt is over, never cancels a later attempt.
func TestAttemptCtxTimerNeverEndsALaterAttempt(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			a := newAttempt(context.Background(), time.Duration(i%3)*time.Microsecond+time.Microsecond)
			if i%2 == 0 {
				a.stopTimeout()
			}
			a.release()
		})
	}
	wg.Wait()
	later := make([]*attemptCtx, 20)
	for i := range later {
		later[i] = newAttempt(context.Background(), time.Hour)
	}
	time.Sleep(20 * time.Millisecond)
	for i, a := range later {
		if err := a.Err(); err != nil {
			t.Errorf("attempt %d: Err() = %v, want nil within its hour", i, err)
		}
		a.release()
	}
}

// ownDoneCtx is a parent that is not one of package context's, so that
// context.AfterFunc must start a goroutine to watch it.
type ownDoneCtx struct {
	context.Context
	done chan struct{}
}

func (c *ownDoneCtx) Done() <-chan struct{} { return c.done }

// TestAttemptCtxNoGoroutineLeft runs attempts that end every way, with
// children and a watched parent, and checks nothing they started outlives
// them. It does not run in parallel, so other tests' goroutines stay out
// of the count.
func TestAttemptCtxNoGoroutineLeft(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	parent := &ownDoneCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(parent.done)
	for i := range 30 {
		timeout := time.Hour
		if i%3 == 2 {
			timeout = time.Millisecond
		}
		a := newAttempt(parent, timeout)
		done := a.Done()
		child, cancelChild := context.WithCancel(a)
		switch i % 3 {
		case 0:
			a.release()
		case 1:
			a.stopTimeout()
			a.release()
		case 2:
			waitClosed(t, done)
			a.release()
		}
		waitClosed(t, child.Done())
		cancelChild()
	}
	goleak.VerifyNone(t, ignore)
}
