package proxies_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests: every proxy
// is stopped and waited for, and every client's idle connections are
// closed, at the end of its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
