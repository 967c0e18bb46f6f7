package retry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// TestBudgetStopsRetries: a shared budget whose floor allows 3 retries in
// its window lets the first calls retry, then ends the next with
// ReasonBudget after a single attempt, through Do and through the Transport.
func TestBudgetStopsRetries(t *testing.T) {
	ft := retrytest.NewFakeTime()
	b := &retry.Budget{Ratio: 0.0001, MinPerSecond: 0.3, Window: 10 * time.Second, Clock: clockwork.NewFakeClock()}
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Budget: b, MaxAttempts: 3}
	calls := 0
	fail := func(context.Context) (int, error) { calls++; return 0, &retry.StatusError{StatusCode: 503} }

	// First call: 3 attempts, 2 retries withdrawn.
	_, err := retry.Do(context.Background(), p, fail)
	var rerr *retry.Error
	if !errors.As(err, &rerr) || rerr.Reason != retry.ReasonMaxAttempts || calls != 3 {
		t.Fatalf("first call: err %v, calls %d; want max_attempts after 3", err, calls)
	}
	// Second call: one retry left, then the budget refuses.
	calls = 0
	_, err = retry.Do(context.Background(), p, fail)
	if !errors.As(err, &rerr) || rerr.Reason != retry.ReasonBudget || rerr.Attempts != 2 || calls != 2 {
		t.Fatalf("second call: err %v, calls %d; want budget after 2 attempts", err, calls)
	}

	// The Transport returns the last response, as on any give-up.
	srv := retrytest.NewServer(t, retrytest.Status(503))
	c := &http.Client{Transport: retry.NewTransport(nil, p)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || srv.Requests() != 1 {
		t.Fatalf("transport: status %d after %d requests; want the 503 after 1", resp.StatusCode, srv.Requests())
	}
}

// TestBudgetInvalid: a bad Budget is a Policy error, before any attempt.
func TestBudgetInvalid(t *testing.T) {
	calls := 0
	_, err := retry.Do(context.Background(), retry.Policy{Budget: &retry.Budget{Ratio: -1}},
		func(context.Context) (int, error) { calls++; return 0, nil })
	if !errors.Is(err, retry.ErrInvalidPolicy) || calls != 0 {
		t.Fatalf("err %v after %d calls; want ErrInvalidPolicy after 0", err, calls)
	}
}
