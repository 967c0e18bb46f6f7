package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/retrytest"
)

// TestDoAttemptTimeout runs in real time: the first attempt hangs until its
// context is done, which its 20ms timeout must bring about long before
// the hang would end.
func TestDoAttemptTimeout(t *testing.T) {
	t.Parallel()
	const hang = 5 * time.Second
	ft := retrytest.NewFakeTime()
	p := Policy{AttemptTimeout: 20 * time.Millisecond, Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
	var calls int
	var firstErr error
	start := time.Now()
	got, err := Do(t.Context(), p, func(ctx context.Context) (string, error) {
		calls++
		if calls > 1 {
			return "ok", nil
		}
		firstErr = hangOn(ctx, hang)
		return "", firstErr
	})
	elapsed := time.Since(start)
	if err != nil || got != "ok" {
		t.Fatalf("Do = (%q, %v), want (\"ok\", nil)", got, err)
	}
	if calls != 2 {
		t.Errorf("fn called %d times, want 2", calls)
	}
	if firstErr != context.DeadlineExceeded {
		t.Errorf("first attempt saw ctx.Err() = %v, want context.DeadlineExceeded", firstErr)
	}
	if elapsed >= 4*time.Second {
		t.Errorf("Do took %v, want far less than the %v hang", elapsed, hang)
	}
}

// TestDoDeadlineCutsAttempt: a 20ms Deadline bounds a single attempt whose
// own timeout is 10s.
func TestDoDeadlineCutsAttempt(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	p := Policy{Deadline: 20 * time.Millisecond, AttemptTimeout: 10 * time.Second,
		Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
	var left time.Duration
	start := time.Now()
	_, err := Do(t.Context(), p, func(ctx context.Context) (int, error) {
		dl, _ := ctx.Deadline()
		left = time.Until(dl)
		return 0, hangOn(ctx, 5*time.Second)
	})
	elapsed := time.Since(start)
	var re *Error
	if !errors.As(err, &re) || re.Reason != ReasonDeadline || re.Attempts != 1 {
		t.Fatalf("err = %v, want *Error{ReasonDeadline, 1 attempt}", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the attempt's context.DeadlineExceeded inside", err)
	}
	if left > 20*time.Millisecond {
		t.Errorf("attempt deadline %v away, want at most the 20ms Deadline", left)
	}
	if elapsed < 20*time.Millisecond || elapsed >= 4*time.Second {
		t.Errorf("Do took %v, want about 20ms", elapsed)
	}
}

// hangOn waits up to d for ctx and returns ctx.Err(), or an error if d
// passed first.
func hangOn(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return errors.New("the attempt was never cancelled")
	}
}
