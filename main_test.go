package retry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a retry
// loop, an attempt timer or a response body that outlives its call is a
// leak users would pay for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
