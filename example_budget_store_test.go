package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
)

// stockStore is a BudgetStore for the example: a fixed stock of retries for
// the whole fleet, kept in memory. The retryredis module keeps the Budget's
// sliding window in Redis instead.
type stockStore struct {
	mu    sync.Mutex
	stock int64 // retries left for the fleet
	down  bool  // answer with an error, as a store that is unreachable
}

func (s *stockStore) Settle(_ context.Context, r retry.BudgetSettlement) (retry.BudgetLease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return retry.BudgetLease{}, errors.New("store unreachable")
	}
	s.stock += r.Unspent // what the process did not spend comes back
	n := min(r.Want, s.stock)
	s.stock -= n
	return retry.BudgetLease{Retries: n}, nil
}

// Two processes, here two Budgets, share one store: together they get the
// fleet's retries, not each its own. When the store fails, each falls back
// to its own in-process window and reports it through OnFallback.
func ExampleBudgetStore() {
	store := &stockStore{stock: 10}
	clock := clockwork.NewFakeClock()
	var fallbacks atomic.Int32 // OnFallback may run in a goroutine of the Budget's
	process := func() *retry.Budget {
		return &retry.Budget{
			MinPerSecond: 0.3, // the in-process floor, used only in a fallback: 3 per 10 s
			Store:        store,
			Lease:        4, // retries taken from the store at a time
			Clock:        clock,
			StoreTimeout: time.Second, // generous for an example; the default is 50 ms
			OnFallback:   func(error) { fallbacks.Add(1) },
		}
	}
	a, b := process(), process()
	granted := 0
	for range 10 {
		for _, p := range []*retry.Budget{a, b} {
			if p.Withdraw() {
				granted++
			}
		}
	}
	fmt.Println("retries granted to the fleet:", granted, "of 20 asked")

	store.mu.Lock()
	store.down = true
	store.mu.Unlock()
	clock.Advance(10 * time.Second) // a window later: the retries spent are forgotten
	local := 0
	for a.Withdraw() {
		local++
	}
	fmt.Println("retries granted by one process's own window with the store down:", local)
	fmt.Println("fallbacks reported:", fallbacks.Load())
	// Output:
	// retries granted to the fleet: 10 of 20 asked
	// retries granted by one process's own window with the store down: 3
	// fallbacks reported: 1
}
