package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

var errBusy = errors.New("busy")

func TestWithRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		errs       []error // returned by the attempts in turn
		deadline   time.Duration
		wantSleeps []time.Duration
		wantHinted []bool
		wantReason retry.Reason // "" for success
	}{
		{
			name:       "outermost hint above backoff is the floor",
			errs:       []error{retry.WithRetryAfter(retry.WithRetryAfter(context.DeadlineExceeded, time.Hour), 3*time.Second), nil},
			wantSleeps: []time.Duration{3 * time.Second},
			wantHinted: []bool{true},
		},
		{
			name:       "hint below backoff leaves the backoff",
			errs:       []error{retry.WithRetryAfter(context.DeadlineExceeded, time.Millisecond), nil},
			wantSleeps: []time.Duration{500 * time.Millisecond},
			wantHinted: []bool{false},
		},
		{
			name:       "wrapped hint is found",
			errs:       []error{fmt.Errorf("call: %w", retry.WithRetryAfter(context.DeadlineExceeded, 2*time.Second)), nil},
			wantSleeps: []time.Duration{2 * time.Second},
			wantHinted: []bool{true},
		},
		{
			name:       "joined hint is found",
			errs:       []error{errors.Join(errBusy, retry.WithRetryAfter(context.DeadlineExceeded, 2*time.Second)), nil},
			wantSleeps: []time.Duration{2 * time.Second},
			wantHinted: []bool{true},
		},
		{
			name:       "zero and negative hints carry nothing",
			errs:       []error{retry.WithRetryAfter(context.DeadlineExceeded, 0), retry.WithRetryAfter(context.DeadlineExceeded, -time.Second), nil},
			wantSleeps: []time.Duration{500 * time.Millisecond, time.Second},
			wantHinted: []bool{false, false},
		},
		{
			name:       "hint past the deadline gives up at once",
			errs:       []error{retry.WithRetryAfter(context.DeadlineExceeded, 2*time.Minute)},
			wantReason: retry.ReasonDeadline,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := retrytest.NewFakeTime()
			var hinted []bool
			p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: func() float64 { return 1 },
				OnRetry: func(e retry.Event) { hinted = append(hinted, e.FromRetryAfter) }}
			calls := 0
			_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
				calls++
				return 0, tt.errs[calls-1]
			})
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
			} else if e, ok := errors.AsType[*retry.Error](err); !ok || e.Reason != tt.wantReason {
				t.Fatalf("Do = %v; want a *retry.Error with reason %s", err, tt.wantReason)
			}
			if diff := cmp.Diff(tt.wantSleeps, ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHinted, hinted); diff != "" {
				t.Errorf("FromRetryAfter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithRetryAfterKeepsErr(t *testing.T) {
	if retry.WithRetryAfter(nil, time.Second) != nil {
		t.Error("WithRetryAfter(nil, d) is not nil")
	}
	err := retry.WithRetryAfter(errBusy, time.Second)
	if !errors.Is(err, errBusy) || err.Error() != "busy" {
		t.Errorf("WithRetryAfter(errBusy) = %q; want it to read and match errBusy", err)
	}
	if retry.IsRetryable(err) {
		t.Error("a hint made an unknown error retryable")
	}
	if !retry.IsRetryable(retry.WithRetryAfter(context.DeadlineExceeded, time.Second)) {
		t.Error("a hint made a retryable error final")
	}
}

func ExampleWithRetryAfter() {
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
		Retryable: func(err error) bool { return errors.Is(err, errBusy) }}
	calls := 0
	v, err := retry.Do(context.Background(), p, func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			// The service said "busy, come back in 5 s".
			return "", retry.WithRetryAfter(errBusy, 5*time.Second)
		}
		return "done", nil
	})
	fmt.Println(v, err, ft.Sleeps())
	// Output: done <nil> [5s]
}
