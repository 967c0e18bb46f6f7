package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// An attempt whose timeout is already spent when it starts (the Deadline
// almost used up) fires its timer while the attempt is being set up. Under
// -race this once reported a data race between arming the timer and
// recording it.
func TestAttemptTimeoutFiringDuringSetup(t *testing.T) {
	p := retry.Policy{MaxAttempts: 3, AttemptTimeout: time.Nanosecond,
		Sleep: func(context.Context, time.Duration) error { return nil }}
	for range 300 {
		calls := 0
		_, err := retry.Do(context.Background(), p, func(ctx context.Context) (int, error) {
			calls++
			<-ctx.Done()
			return 0, ctx.Err()
		})
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonMaxAttempts || calls != 3 {
			t.Fatalf("Do = %v after %d calls, want *Error{max_attempts} after 3", err, calls)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do = %v, want it to wrap the attempt's timeout", err)
		}
	}
}
