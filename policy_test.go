package retry_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// withFakeTime returns p with its Clock, Sleep and Rand taken from ft.
func withFakeTime(p retry.Policy, ft *retrytest.FakeTime) retry.Policy {
	p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
	return p
}

// loopScript is a function for Do that fails with errs in turn, then
// succeeds with "ok", counting its calls.
type loopScript struct {
	errs  []error
	calls atomic.Int32
	work  func() // run at the start of every call, e.g. to advance a fake clock; nil: none
}

func (s *loopScript) fn(context.Context) (string, error) {
	n := int(s.calls.Add(1))
	if s.work != nil {
		s.work()
	}
	if n <= len(s.errs) {
		return "", s.errs[n-1]
	}
	return "ok", nil
}

// statusErr returns a new *retry.StatusError for code.
func statusErr(code int) *retry.StatusError {
	return &retry.StatusError{StatusCode: code}
}

// statusErrs returns n distinct *retry.StatusError values for code, so a test
// can tell which attempt an error came from.
func statusErrs(n, code int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = statusErr(code)
	}
	return errs
}

func checkCalls(t *testing.T, s *loopScript, want int) {
	t.Helper()
	if got := int(s.calls.Load()); got != want {
		t.Errorf("fn called %d times, want %d", got, want)
	}
}

func checkSleeps(t *testing.T, ft *retrytest.FakeTime, want ...time.Duration) {
	t.Helper()
	if diff := cmp.Diff(want, ft.Sleeps(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("sleeps mismatch (-want +got):\n%s", diff)
	}
}

// checkGaveUp checks that err is a *retry.Error with the given reason and
// attempt count, and returns it.
func checkGaveUp(t *testing.T, err error, reason retry.Reason, attempts int) *retry.Error {
	t.Helper()
	re, ok := errors.AsType[*retry.Error](err)
	if !ok {
		t.Fatalf("err = %v (%T), want a *retry.Error", err, err)
	}
	if re.Reason != reason || re.Attempts != attempts {
		t.Errorf("gave up with (%s, %d attempts), want (%s, %d attempts)",
			re.Reason, re.Attempts, reason, attempts)
	}
	return re
}

func TestDoSuccessAfterTwoFailures(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	s := &loopScript{errs: []error{statusErr(503), statusErr(429)}}
	got, err := retry.Do(t.Context(), withFakeTime(retry.Policy{}, ft), s.fn)
	if err != nil || got != "ok" {
		t.Fatalf("Do = (%q, %v), want (\"ok\", nil)", got, err)
	}
	checkCalls(t, s, 3)
	checkSleeps(t, ft, 500*time.Millisecond, time.Second)
}

func TestDoDeadline(t *testing.T) {
	t.Parallel()
	const s1 = time.Second
	tests := []struct {
		name         string
		p            retry.Policy
		work         time.Duration // fake time each attempt takes
		wantAttempts int
		wantSleeps   []time.Duration
		wantElapsed  time.Duration
	}{
		{
			name:         "next delay would cross the deadline",
			p:            retry.Policy{Base: s1, Cap: 100 * s1, Deadline: 10 * s1, MaxAttempts: 10},
			wantAttempts: 4, wantSleeps: []time.Duration{s1, 2 * s1, 4 * s1}, wantElapsed: 7 * s1,
		},
		{
			name:         "a delay reaching the deadline exactly is not slept",
			p:            retry.Policy{Base: s1, Deadline: s1},
			wantAttempts: 1, wantElapsed: 0,
		},
		{
			name:         "a delay just short of the deadline is slept",
			p:            retry.Policy{Base: s1, Deadline: s1 + 1},
			wantAttempts: 2, wantSleeps: []time.Duration{s1}, wantElapsed: s1,
		},
		{
			name:         "time spent in attempts counts",
			p:            retry.Policy{Base: s1, Deadline: 10 * s1},
			work:         4 * s1,
			wantAttempts: 2, wantSleeps: []time.Duration{s1}, wantElapsed: 9 * s1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			s := &loopScript{errs: statusErrs(20, 503)}
			if tt.work > 0 {
				s.work = func() { ft.Clock.Advance(tt.work) }
			}
			start := ft.Clock.Now()
			_, err := retry.Do(t.Context(), withFakeTime(tt.p, ft), s.fn)
			re := checkGaveUp(t, err, retry.ReasonDeadline, tt.wantAttempts)
			if re.Err != s.errs[tt.wantAttempts-1] {
				t.Errorf("Err = %p, want the last attempt's error %p", re.Err, s.errs[tt.wantAttempts-1])
			}
			checkCalls(t, s, tt.wantAttempts)
			checkSleeps(t, ft, tt.wantSleeps...)
			if got := ft.Clock.Since(start); got != tt.wantElapsed {
				t.Errorf("fake clock moved %v, want %v", got, tt.wantElapsed)
			}
		})
	}
}

// TestDoAttemptTimeoutCutToDeadline checks step 3 of the loop: the attempt
// timeout is cut to what is left of the Deadline.
func TestDoAttemptTimeoutCutToDeadline(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	var left []time.Duration // time to the attempt's deadline, at its start
	p := withFakeTime(retry.Policy{Base: time.Second, Deadline: 10 * time.Second}, ft)
	_, err := retry.Do(t.Context(), p, func(ctx context.Context) (int, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("attempt context has no deadline")
		}
		left = append(left, time.Until(dl))
		ft.Clock.Advance(4 * time.Second)
		return 0, statusErr(503)
	})
	checkGaveUp(t, err, retry.ReasonDeadline, 2)
	// Attempt 1: the default 10s. Attempt 2 starts 5 s in: 5 s left.
	wants := []time.Duration{retry.DefaultAttemptTimeout, 5 * time.Second}
	if len(left) != len(wants) {
		t.Fatalf("%d attempts, want %d", len(left), len(wants))
	}
	for i, want := range wants {
		if left[i] > want || left[i] < want-2*time.Second {
			t.Errorf("attempt %d: deadline %v away, want just under %v", i+1, left[i], want)
		}
	}
}

func TestDoSleepOverrunningDeadline(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	p := withFakeTime(retry.Policy{Deadline: 10 * time.Second}, ft)
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		return ft.Sleep(ctx, d+10*time.Second) // a sleep that overshoots
	}
	s := &loopScript{errs: statusErrs(5, 503)}
	_, err := retry.Do(t.Context(), p, s.fn)
	re := checkGaveUp(t, err, retry.ReasonDeadline, 1)
	if re.Err != s.errs[0] {
		t.Errorf("Err = %v, want the first attempt's error", re.Err)
	}
	checkCalls(t, s, 1)
}

func TestDoInvalidPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    retry.Policy
	}{
		{name: "MaxAttempts", p: retry.Policy{MaxAttempts: -1}},
		{name: "AttemptTimeout", p: retry.Policy{AttemptTimeout: -time.Second}},
		{name: "Deadline", p: retry.Policy{Deadline: -1}},
		{name: "Base", p: retry.Policy{Base: -time.Millisecond}},
		{name: "Cap", p: retry.Policy{Cap: -time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			s := &loopScript{}
			_, err := retry.Do(t.Context(), withFakeTime(tt.p, ft), s.fn)
			if !errors.Is(err, retry.ErrInvalidPolicy) {
				t.Errorf("err = %v, want one wrapping ErrInvalidPolicy", err)
			}
			if err != nil && !strings.Contains(err.Error(), tt.name) {
				t.Errorf("err = %q, want it to name the field %s", err, tt.name)
			}
			checkCalls(t, s, 0)
			checkSleeps(t, ft)
		})
	}
}

func TestDoNilFunc(t *testing.T) {
	t.Parallel()
	if _, err := retry.Do[string](t.Context(), retry.Policy{}, nil); err == nil {
		t.Error("Do(nil fn) = nil error, want an error")
	}
}

func TestDoZeroPolicyDefaults(t *testing.T) {
	t.Parallel()
	t.Run("attempts, base and attempt timeout", func(t *testing.T) {
		t.Parallel()
		ft := retrytest.NewFakeTime()
		var left time.Duration
		s := &loopScript{errs: statusErrs(10, 503)}
		_, err := retry.Do(t.Context(), withFakeTime(retry.Policy{}, ft), func(ctx context.Context) (string, error) {
			if dl, ok := ctx.Deadline(); ok && left == 0 {
				left = time.Until(dl)
			}
			return s.fn(ctx)
		})
		checkGaveUp(t, err, retry.ReasonMaxAttempts, retry.DefaultMaxAttempts)
		checkSleeps(t, ft, 500*time.Millisecond, time.Second, 2*time.Second, 4*time.Second)
		if left > retry.DefaultAttemptTimeout || left < retry.DefaultAttemptTimeout-2*time.Second {
			t.Errorf("first attempt's deadline %v away, want just under %v", left, retry.DefaultAttemptTimeout)
		}
	})
	t.Run("cap and deadline", func(t *testing.T) {
		t.Parallel()
		// Base 20s: 20s, then the 30s cap; 50s + 30s would pass the 60s deadline.
		ft := retrytest.NewFakeTime()
		s := &loopScript{errs: statusErrs(10, 503)}
		_, err := retry.Do(t.Context(), withFakeTime(retry.Policy{Base: 20 * time.Second}, ft), s.fn)
		checkGaveUp(t, err, retry.ReasonDeadline, 3)
		checkSleeps(t, ft, 20*time.Second, retry.DefaultCap)
	})
}

func TestDoOnRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxAttempts int
		errs        []error
		wantDelays  []time.Duration
	}{
		{
			name: "one event per retry", errs: []error{statusErr(503), statusErr(429)},
			wantDelays: []time.Duration{500 * time.Millisecond, time.Second},
		},
		{
			name: "none after the final attempt", maxAttempts: 2, errs: statusErrs(2, 503),
			wantDelays: []time.Duration{500 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			var events []retry.Event
			var sleptBefore []int // sleeps already done when each event came
			p := withFakeTime(retry.Policy{MaxAttempts: tt.maxAttempts}, ft)
			p.OnRetry = func(e retry.Event) {
				events = append(events, e)
				sleptBefore = append(sleptBefore, len(ft.Sleeps()))
			}
			s := &loopScript{errs: tt.errs}
			_, _ = retry.Do(t.Context(), p, s.fn)
			var want []retry.Event
			var wantSlept []int
			for i, d := range tt.wantDelays {
				want = append(want, retry.Event{Attempt: i + 1, Err: tt.errs[i], Delay: d, Context: t.Context()})
				wantSlept = append(wantSlept, i)
			}
			if !slices.Equal(events, want) {
				t.Errorf("events = %+v, want %+v", events, want)
			}
			if !slices.Equal(sleptBefore, wantSlept) {
				t.Errorf("sleeps done at each event = %v, want %v (events come before their sleep)",
					sleptBefore, wantSlept)
			}
		})
	}
}

func TestDoCallerCanceledBeforeCall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ft := retrytest.NewFakeTime()
	s := &loopScript{}
	_, err := retry.Do(ctx, withFakeTime(retry.Policy{}, ft), s.fn)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	checkCalls(t, s, 0)
	checkSleeps(t, ft)
}

// TestDoCallerCanceledDuringAttempt cancels the caller's context while fn
// waits on its attempt's context: the attempt must end at once and Do must
// return without another attempt.
func TestDoCallerCanceledDuringAttempt(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name     string
		deadline bool                  // the caller's context times out instead of being cancelled
		result   func(ctx error) error // what fn returns once its context is done
		wantAs   bool                  // a *StatusError must be found in the result
	}{
		{name: "fn returns a 503", result: func(error) error { return statusErr(503) }, wantAs: true},
		{name: "fn returns ctx.Err()", result: func(err error) error { return err }},
		{name: "fn returns its own error", result: func(error) error { return boom }},
		{name: "caller deadline passes", deadline: true, result: func(err error) error { return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			if tt.deadline {
				ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
			}
			defer cancel()
			ft := retrytest.NewFakeTime()
			var calls int
			var returned error
			start := time.Now()
			_, err := retry.Do(ctx, withFakeTime(retry.Policy{AttemptTimeout: time.Minute}, ft),
				func(actx context.Context) (int, error) {
					calls++
					if !tt.deadline {
						go cancel()
					}
					<-actx.Done()
					returned = tt.result(actx.Err())
					return 0, returned
				})
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("Do returned after %v, want at once", elapsed)
			}
			if !errors.Is(err, ctx.Err()) {
				t.Errorf("err = %v, want errors.Is(err, %v)", err, ctx.Err())
			}
			if !errors.Is(err, returned) {
				t.Errorf("err = %v, want it to carry the attempt's error %v", err, returned)
			}
			if _, ok := errors.AsType[*retry.StatusError](err); ok != tt.wantAs {
				t.Errorf("errors.As(err, *StatusError) = %v, want %v", ok, tt.wantAs)
			}
			if calls != 1 {
				t.Errorf("fn called %d times, want 1", calls)
			}
			checkSleeps(t, ft)
		})
	}
}

func TestDoCallerCanceledDuringSleep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ft := retrytest.NewFakeTime()
	p := withFakeTime(retry.Policy{}, ft)
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	first := statusErr(503)
	s := &loopScript{errs: []error{first}}
	_, err := retry.Do(ctx, p, s.fn)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if se, ok := errors.AsType[*retry.StatusError](err); !ok || se != first {
		t.Errorf("errors.As(err, *StatusError) = %v, %v; want the attempt's %p", se, ok, first)
	}
	checkCalls(t, s, 1)
}

func TestDoCallerDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	callerDL, _ := ctx.Deadline()
	ft := retrytest.NewFakeTime()
	// The next delay, 2 minutes, would cross the caller's deadline, a
	// minute away; the Policy's own Deadline and AttemptTimeout are far.
	p := withFakeTime(retry.Policy{
		Base: 2 * time.Minute, Cap: 2 * time.Minute, Deadline: time.Hour, AttemptTimeout: time.Hour,
	}, ft)
	var attemptDL time.Time
	first := statusErr(503)
	_, err := retry.Do(ctx, p, func(actx context.Context) (int, error) {
		attemptDL, _ = actx.Deadline()
		return 0, first
	})
	re := checkGaveUp(t, err, retry.ReasonDeadline, 1)
	if re.Err != first {
		t.Errorf("Err = %v, want the attempt's error", re.Err)
	}
	checkSleeps(t, ft)
	if !attemptDL.Equal(callerDL) {
		t.Errorf("attempt deadline = %v, want the caller's sooner %v", attemptDL, callerDL)
	}
}

// TestSleepFailsOnItsOwn: a custom Sleep that fails while the caller's
// context is alive ends the call with its error, and the last attempt's
// error, rather than pretending the caller cancelled.
func TestSleepFailsOnItsOwn(t *testing.T) {
	errSleep := errors.New("sleep broke")
	last := &retry.StatusError{StatusCode: 503}
	calls := 0
	_, err := retry.Do(context.Background(), retry.Policy{
		Sleep: func(context.Context, time.Duration) error { return errSleep },
		Rand:  func() float64 { return 1 },
	}, func(context.Context) (int, error) { calls++; return 0, last })
	if !errors.Is(err, errSleep) || !errors.Is(err, last) || errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("err = %v after %d calls; want the Sleep's error and the last error, not Canceled, after 1", err, calls)
	}
}

// TestDoNilContext: a nil context counts as context.Background() rather
// than panicking.
func TestDoNilContext(t *testing.T) {
	var nilCtx context.Context
	got, err := retry.Do(nilCtx, retry.Policy{}, func(ctx context.Context) (int, error) {
		if ctx == nil || ctx.Err() != nil {
			return 0, errors.New("attempt context unusable")
		}
		return 7, nil
	})
	if got != 7 || err != nil {
		t.Fatalf("Do(nil ctx) = %v, %v; want 7, nil", got, err)
	}
}
