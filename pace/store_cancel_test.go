package pace

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

	"github.com/retrykit/retry"
)

// blockingPacerStore is a PacerStore whose Reserve, or Learn, blocks
// until its context ends; it records the error that ended it.
type blockingPacerStore struct {
	reserve, learn bool // which one blocks; the other answers at once

	mu    sync.Mutex
	ended []error // the ctx.Err of each blocked call
}

func (s *blockingPacerStore) Reserve(ctx context.Context, _ string, _ float64, _ time.Duration) (Grant, error) {
	if !s.reserve {
		return Grant{}, nil
	}
	return Grant{}, s.block(ctx)
}

func (s *blockingPacerStore) Learn(ctx context.Context, _ string, _ Report) error {
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
				tr := &retry.Transport{Base: &scriptedRT{script: []http.Header{openAIHeaders(10, 9, "1s")}}, Pacer: p}
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
