package retry

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cancelAfter returns a context cancelled after d of real time.
func cancelAfter(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	time.AfterFunc(d, cancel)
	return ctx
}

// blockingBudgetStore is a BudgetStore that grants whole leases until
// block is set, and then blocks until its context ends; it records the
// error that ended each blocked call.
type blockingBudgetStore struct {
	mu    sync.Mutex
	block bool
	ended []error // the ctx.Err of each blocked call
}

func (s *blockingBudgetStore) Settle(ctx context.Context, req BudgetSettlement) (BudgetLease, error) {
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if !block {
		return BudgetLease{Retries: req.Want, Epoch: 1}, nil
	}
	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, ctx.Err())
	return BudgetLease{}, ctx.Err()
}

// TestBudgetStoreSettlementEndsWithTheCaller: a retry whose call is
// cancelled while it waits for the Budget's store returns at once, not
// after StoreTimeout, as a cancelled call does; the store's context ends
// with it, and the store has not failed: no OnFallback, no fallback
// window. In a bubble: StoreTimeout is ten seconds of virtual time.
func TestBudgetStoreSettlementEndsWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const cancelAt = 50 * time.Millisecond
		store := &blockingBudgetStore{}
		var fallbacks atomic.Int32
		b := &Budget{Store: store, Lease: 1, StoreTimeout: 10 * time.Second,
			OnFallback: func(error) { fallbacks.Add(1) }}
		// A lease of one, spent: the retry below settles, and waits.
		b.Deposit()
		synctest.Wait()
		if !b.Withdraw() {
			t.Fatal("Withdraw = false; want the one retry of the lease")
		}
		store.mu.Lock()
		store.block = true
		store.mu.Unlock()

		p := Policy{Budget: b, MaxAttempts: 2, Rand: func() float64 { return 0 }}
		start := time.Now()
		_, err := Do(cancelAfter(t, cancelAt), p, func(context.Context) (int, error) {
			return 0, &StatusError{StatusCode: http.StatusServiceUnavailable}
		})
		if took := time.Since(start); took > cancelAt {
			t.Errorf("Do took %v with a cancel at %v; want it to return at the cancel", took, cancelAt)
		}
		var e *Error
		if !errors.Is(err, context.Canceled) || errors.As(err, &e) {
			t.Errorf("Do = %v; want an error that is context.Canceled, not a *Error", err)
		}
		synctest.Wait() // the settlement, if it outlived the call
		b.mu.Lock()
		fellBack := b.shared.fallback
		b.mu.Unlock()
		if n := fallbacks.Load(); n != 0 || fellBack {
			t.Errorf("%d fallbacks, in the fallback window: %v; want neither", n, fellBack)
		}
		store.mu.Lock()
		if diff := cmp.Diff([]error{context.Canceled}, store.ended, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("what ended the store's call (-want +got):\n%s", diff)
		}
		store.block = false
		store.mu.Unlock()
		if !b.Withdraw() { // the cut settlement is made again
			t.Error("Withdraw after the cut = false; want the next settlement's lease")
		}
	})
}
