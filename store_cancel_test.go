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

// blockingPacerStore is a PacerStore whose Reserve, or Learn, blocks
// until its context ends; it records the error that ended it.
type blockingPacerStore struct {
	reserve, learn bool // which one blocks; the other answers at once

	mu    sync.Mutex
	ended []error // the ctx.Err of each blocked call
}

func (s *blockingPacerStore) Reserve(ctx context.Context, _ string, _ float64, _ time.Duration) (PaceGrant, error) {
	if !s.reserve {
		return PaceGrant{}, nil
	}
	return PaceGrant{}, s.block(ctx)
}

func (s *blockingPacerStore) Learn(ctx context.Context, _ string, _ PaceReport) error {
	if !s.learn {
		return nil
	}
	return s.block(ctx)
}

func (s *blockingPacerStore) block(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, ctx.Err())
	return ctx.Err()
}

// cancelAfter is a context cancelled after d, in the bubble's time.
func cancelAfter(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	time.AfterFunc(d, cancel)
	return ctx
}

// TestPacerStoreCallEndsWithTheCaller: a caller cancelled while the
// Pacer's store is busy with its call returns at once, not after
// StoreTimeout; the store's context ends with it, and the store has not
// failed: no OnFallback, and it is still asked. In a bubble: StoreTimeout
// is ten seconds of virtual time.
func TestPacerStoreCallEndsWithTheCaller(t *testing.T) {
	const cancelAt = 50 * time.Millisecond
	tests := []struct {
		name    string
		store   *blockingPacerStore
		wantErr error // nil: the response, which came before the cancel
	}{
		{name: "Reserve", store: &blockingPacerStore{reserve: true}, wantErr: context.Canceled},
		{name: "Learn", store: &blockingPacerStore{learn: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var fallbacks atomic.Int32
				p := &Pacer{Store: tt.store, StoreTimeout: 10 * time.Second,
					OnFallback: func(error) { fallbacks.Add(1) }}
				tr := &Transport{Base: &scriptedRT{script: []http.Header{openAIHeaders(10, 9, "1s")}}, Pacer: p}
				req := newRequest(t, http.MethodGet, "https://api.example.com/", nil).
					WithContext(cancelAfter(t, cancelAt))
				start := time.Now()
				resp, err := tr.RoundTrip(req)
				if took := time.Since(start); took > cancelAt {
					t.Errorf("RoundTrip took %v with a cancel at %v; want it to return at the cancel", took, cancelAt)
				}
				switch {
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Errorf("RoundTrip = %v; want an error that is %v", err, tt.wantErr)
				case tt.wantErr == nil && (err != nil || resp.StatusCode != http.StatusOK):
					t.Errorf("RoundTrip = %v, %v; want the 200", resp, err)
				}
				if resp != nil {
					resp.Body.Close()
				}
				if n := fallbacks.Load(); n != 0 || !p.storeOn() {
					t.Errorf("%d fallbacks, store on: %v; want none, and the store still asked", n, p.storeOn())
				}
				synctest.Wait() // the store's call, if it outlived the call
				tt.store.mu.Lock()
				defer tt.store.mu.Unlock()
				if diff := cmp.Diff([]error{context.Canceled}, tt.store.ended, cmpopts.EquateErrors()); diff != "" {
					t.Errorf("what ended the store's call (-want +got):\n%s", diff)
				}
			})
		})
	}
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
