package retrygrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// slowAttempt is the AttemptTimeout of tests in which an attempt hangs and
// the next one must succeed. Attempt timeouts run in real time; this one is
// long enough that a loaded machine answers the next attempt within it.
const slowAttempt = time.Second

// warmUp connects conn and waits until it is ready.
func warmUp(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			return ctx.Err()
		}
	}
	return nil
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.AttemptTimeout = slowAttempt
	s, conn := startServer(t, steps(reply{hang: true}), withRetries(p)...)
	if err := warmUp(testContext(t), conn); err != nil {
		t.Fatal(err)
	}
	got, err := say(testContext(t), conn, "slow")
	if err != nil || got != "slow" {
		t.Fatalf("say = %q, %v; want %q, nil", got, err, "slow")
	}
	if c := s.Calls("slow"); c != 2 {
		t.Errorf("server got %d calls, want 2", c)
	}
}

func TestAttemptTimeoutEveryTime(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.MaxAttempts = 2
	p.AttemptTimeout = slowAttempt
	hang := reply{hang: true}
	s, conn := startServer(t, steps(hang, hang), withRetries(p)...)
	if err := warmUp(testContext(t), conn); err != nil {
		t.Fatal(err)
	}
	_, err := say(testContext(t), conn, "slow")
	if c := s.Calls("slow"); c != 2 {
		t.Errorf("server got %d calls, want 2", c)
	}
	checkShape(t, err, retry.ReasonMaxAttempts, 2)
	if got := status.Code(err); got != codes.DeadlineExceeded {
		t.Errorf("status.Code = %v, want DeadlineExceeded", got)
	}
}

func TestCallerDeadlineIsNotRetried(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.AttemptTimeout = time.Minute
	s, conn := startServer(t, func(n int) reply { return reply{hang: true} }, withRetries(p)...)
	// The connection is up before the deadline starts, so that a slow
	// machine still makes the call within it.
	if err := warmUp(testContext(t), conn); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(testContext(t), slowAttempt)
	defer cancel()
	_, err := say(ctx, conn, "slow")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want one matching context.DeadlineExceeded", err)
	}
	if got := status.Code(err); got != codes.DeadlineExceeded {
		t.Errorf("status.Code = %v, want DeadlineExceeded", got)
	}
	if c := s.Calls("slow"); c != 1 {
		t.Errorf("server got %d calls, want 1", c)
	}
}

// TestCancelDuringBackoff cancels while the default Sleep waits on the fake
// clock, which never moves: only the cancel can end the wait.
func TestCancelDuringBackoff(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.Sleep = nil // wait on p.Clock, for real
	s, conn := startServer(t, steps(unavailable("down")), withRetries(p)...)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := say(ctx, conn, "x")
		done <- err
	}()
	if err := ft.Clock.BlockUntilContext(testContext(t), 1); err != nil {
		t.Fatalf("no backoff began: %v", err)
	}
	begin := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("call still running 10s after cancel")
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("call returned %v after cancel, want at once", took)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want one matching context.Canceled", err)
	}
	if got := status.Code(err); got != codes.Canceled {
		t.Errorf("status.Code = %v, want Canceled", got)
	}
	// The message still tells what the call was waiting to retry.
	if msg := err.Error(); !strings.Contains(msg, "context canceled") || !strings.Contains(msg, "down") {
		t.Errorf("err.Error() = %q, want the cancel and the last error", msg)
	}
	if c := s.Calls("x"); c != 1 {
		t.Errorf("server got %d calls, want 1", c)
	}
}

func TestCancelBeforeCall(t *testing.T) {
	ft := retrytest.NewFakeTime()
	s, conn := startServer(t, steps(), withRetries(fakePolicy(ft))...)
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	_, err := say(ctx, conn, "x")
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Errorf("err = %v (code %v), want context.Canceled and code Canceled", err, status.Code(err))
	}
	if c := s.Calls("x"); c != 0 {
		t.Errorf("server got %d calls, want 0", c)
	}
}

// TestServerSeesTheAttemptDeadline checks that grpc sends each attempt's
// deadline, the sooner of AttemptTimeout and the caller's, to the server.
func TestServerSeesTheAttemptDeadline(t *testing.T) {
	tests := []struct {
		name           string
		attemptTimeout time.Duration
		callerTimeout  time.Duration // 0: none
		want           time.Duration // the most the server may see left
	}{
		{name: "attempt timeout", attemptTimeout: 5 * time.Second, want: 5 * time.Second},
		{name: "caller sooner", attemptTimeout: 20 * time.Second, callerTimeout: 5 * time.Second, want: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := fakePolicy(retrytest.NewFakeTime())
			p.AttemptTimeout = tt.attemptTimeout
			s, conn := startServer(t, steps(), withRetries(p)...)
			ctx := testContext(t)
			if err := warmUp(ctx, conn); err != nil {
				t.Fatal(err)
			}
			if tt.callerTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.callerTimeout)
				defer cancel()
			}
			if _, err := say(ctx, conn, "d"); err != nil {
				t.Fatal(err)
			}
			left, ok := s.Left("d")
			if !ok || left <= 0 || left > tt.want {
				t.Errorf("server saw %v left (deadline %v), want in (0, %v]", left, ok, tt.want)
			}
		})
	}
}

func TestCancelDuringAttempt(t *testing.T) {
	ft := retrytest.NewFakeTime()
	s, conn := startServer(t, steps(reply{hang: true}), withRetries(fakePolicy(ft))...)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := say(ctx, conn, "x")
		done <- err
	}()
	// Cancel once the server holds the call.
	for s.Calls("x") == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("call still running 10s after cancel")
	}
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Errorf("err = %v (code %v), want context.Canceled and code Canceled", err, status.Code(err))
	}
	if c := s.Calls("x"); c != 1 {
		t.Errorf("server got %d calls, want 1", c)
	}
	if got := ft.Sleeps(); len(got) != 0 {
		t.Errorf("slept %v after the cancel, want no sleep", got)
	}
}
