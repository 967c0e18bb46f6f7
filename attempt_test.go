package retry

import (
	"context"
	"testing"
	"time"
)

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
