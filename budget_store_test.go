package retry

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
)

// fakeStore is a BudgetStore with a fixed stock of retries for the whole
// fleet and no window: it grants from the stock and takes back what is
// handed back, and records what it is told.
type fakeStore struct {
	mu       sync.Mutex // protects the fields below
	stock    int64      // retries left to grant
	deposits int64      // first attempts reported
	calls    int
	fail     error                                 // returned while set
	answer   func(BudgetSettlement) BudgetLease    // overrides the grant when set
	block    func(ctx context.Context) (err error) // called first when set
	release  chan struct{}                         // for a block to wait on
}

func (f *fakeStore) Settle(ctx context.Context, s BudgetSettlement) (BudgetLease, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		if err := block(ctx); err != nil {
			return BudgetLease{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return BudgetLease{}, f.fail
	}
	if f.answer != nil {
		return f.answer(s), nil
	}
	f.deposits += s.Deposits
	f.stock += s.Unspent
	n := min(s.Want, f.stock)
	f.stock -= n
	return BudgetLease{Retries: n, Epoch: int64(f.calls)}, nil
}

func (f *fakeStore) set(do func(f *fakeStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do(f)
}

func (f *fakeStore) stats() (calls int, deposits, stock int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.deposits, f.stock
}

// settled waits for a settlement that Deposit started in the background.
func settled(t *testing.T, b *Budget) {
	t.Helper()
	b.mu.Lock()
	wait := b.shared.inflight
	b.mu.Unlock()
	if wait != nil && !waitUntil(context.Background(), wait, time.Now().Add(10*time.Second)) {
		t.Fatal("a background settlement is still running after 10 s")
	}
}

func newStoreBudget(s BudgetStore) (*Budget, *clockwork.FakeClock) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// A StoreTimeout that a busy machine cannot miss, so that a fake store
	// always answers in time; tests of the timeout set their own.
	return &Budget{Ratio: 0.5, MinPerSecond: 0.2, Window: 10 * time.Second, Clock: clock, Store: s, Lease: 3,
		StoreTimeout: 10 * time.Second}, clock
}

// withdrawN returns how many of n retries b allows.
func withdrawN(b *Budget, n int) int {
	got := 0
	for range n {
		if b.Withdraw() {
			got++
		}
	}
	return got
}

func TestBudgetStoreLeases(t *testing.T) {
	t.Parallel()
	store := &fakeStore{stock: 7}
	b, clock := newStoreBudget(store)
	var fallbacks atomic.Int32
	b.OnFallback = func(error) { fallbacks.Add(1) }

	b.Deposit() // starts the first settlement in the background
	settled(t, b)
	if calls, deposits, stock := store.stats(); calls != 1 || deposits != 1 || stock != 4 {
		t.Fatalf("after one deposit: %d calls, %d deposits, stock %d; want 1, 1, 4", calls, deposits, stock)
	}
	for range 4 {
		b.Deposit() // not due yet: counted locally
	}
	// 3 from the lease, 3 from a second, then 1 from a third cut short.
	if got := withdrawN(b, 9); got != 7 {
		t.Errorf("%d of 9 retries allowed, want the stock of 7", got)
	}
	calls, deposits, _ := store.stats()
	if calls != 3 || deposits != 5 {
		t.Errorf("%d store calls, %d deposits settled; want 3 and 5", calls, deposits)
	}
	// The lease was cut short: the Budget refuses without asking again
	// until SettleEvery has passed.
	if b.Withdraw() {
		t.Error("a retry was allowed with the fleet's budget spent")
	}
	if calls, _, _ := store.stats(); calls != 3 {
		t.Errorf("%d store calls after a refusal, want still 3", calls)
	}
	store.set(func(f *fakeStore) { f.stock = 2 })
	clock.Advance(DefaultBudgetSettleEvery)
	if got := withdrawN(b, 3); got != 2 {
		t.Errorf("after SettleEvery: %d of 3 retries allowed, want the new stock of 2", got)
	}
	if n := fallbacks.Load(); n != 0 {
		t.Errorf("OnFallback called %d times, want 0", n)
	}
}

func TestBudgetStoreHandsBackUnspent(t *testing.T) {
	t.Parallel()
	store := &fakeStore{stock: 10}
	b, clock := newStoreBudget(store)
	if !b.Withdraw() { // settles: a lease of 3, one spent
		t.Fatal("first retry refused")
	}
	clock.Advance(DefaultBudgetSettleEvery)
	b.Deposit() // due: settles in the background, handing back 2
	settled(t, b)
	if _, _, stock := store.stats(); stock != 10-1-3 {
		t.Errorf("stock %d after one retry and a fresh lease, want %d", stock, 10-1-3)
	}
}

func TestBudgetStoreFallback(t *testing.T) {
	t.Parallel()
	down := errors.New("store down")
	tests := []struct {
		name    string
		set     func(f *fakeStore)
		timeout time.Duration // StoreTimeout; zero: newStoreBudget's
	}{
		{name: "error", set: func(f *fakeStore) { f.fail = down }},
		{name: "more than asked", set: func(f *fakeStore) {
			f.answer = func(s BudgetSettlement) BudgetLease { return BudgetLease{Retries: s.Want + 1} }
		}},
		{name: "negative lease", set: func(f *fakeStore) {
			f.answer = func(BudgetSettlement) BudgetLease { return BudgetLease{Retries: -5} }
		}},
		{name: "slower than StoreTimeout", timeout: 50 * time.Millisecond, set: func(f *fakeStore) {
			f.block = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		}},
		{name: "deaf to its context", timeout: 50 * time.Millisecond, set: func(f *fakeStore) {
			f.block = func(context.Context) error { <-f.release; return errors.New("late") }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &fakeStore{stock: 1000, release: make(chan struct{})}
			t.Cleanup(func() { close(store.release) })
			store.set(tt.set)
			b, clock := newStoreBudget(store)
			if tt.timeout != 0 {
				b.StoreTimeout = tt.timeout
			}
			var errs []error
			var mu sync.Mutex
			b.OnFallback = func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }

			began := time.Now()
			// The in-process window: a floor of 2, and 0.5 for each of 2
			// deposits made before the store was asked.
			b.Deposit()
			b.Deposit()
			settled(t, b)
			if got := withdrawN(b, 5); got != 3 {
				t.Errorf("%d of 5 retries allowed in fallback, want 3 by the local rule", got)
			}
			// Generous: the bound is StoreTimeout.
			if d := time.Since(began); d > 2*time.Second {
				t.Errorf("the calls took %v with a failing store", d)
			}
			mu.Lock()
			n := len(errs)
			mu.Unlock()
			if n != 1 {
				t.Errorf("OnFallback called %d times, want once (the store is asked again only after SettleEvery)", n)
			}

			// The store answers again: after SettleEvery, a deposit asks it
			// in the background, and the Budget uses its leases again.
			store.set(func(f *fakeStore) { f.fail, f.answer, f.block = nil, nil, nil })
			clock.Advance(DefaultBudgetSettleEvery)
			b.Deposit()
			settled(t, b)
			if got := withdrawN(b, 10); got != 10 {
				t.Errorf("%d of 10 retries allowed once the store is back, want 10", got)
			}
		})
	}
}

// TestBudgetStoreConcurrent: many goroutines share one Budget, and two
// Budgets share one store, as two processes would: together they never
// spend more than the store holds, and spend all of it.
func TestBudgetStoreConcurrent(t *testing.T) {
	t.Parallel()
	const stock = 500
	store := &fakeStore{stock: stock}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		b := &Budget{Store: store, Lease: 7, MinPerSecond: 1e-9}
		for range 8 {
			wg.Go(func() {
				for range 100 {
					b.Deposit()
					if b.Withdraw() {
						granted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	// Leases cut short make each Budget refuse until SettleEvery passes,
	// so not all of the stock need be spent; none may be overspent.
	got := granted.Load()
	_, deposits, left := store.stats()
	if got > stock || got+left > stock {
		t.Errorf("%d retries granted, %d left in the store; the stock was %d", got, left, stock)
	}
	if got == 0 || deposits == 0 {
		t.Errorf("%d retries granted, %d deposits settled; want some of each", got, deposits)
	}
}

func TestBudgetStoreSettlement(t *testing.T) {
	t.Parallel()
	var got []BudgetSettlement
	store := &fakeStore{}
	store.answer = func(s BudgetSettlement) BudgetLease {
		got = append(got, s)
		return BudgetLease{Retries: s.Want, Epoch: 42}
	}
	b, clock := newStoreBudget(store)
	b.Ratio, b.MinPerSecond, b.Window = 0, 0, 0 // the defaults are sent
	b.Deposit()
	settled(t, b)
	b.Withdraw()
	clock.Advance(DefaultBudgetSettleEvery)
	b.Withdraw() // the lease is stale: settle, handing back 2
	rule := BudgetSettlement{Want: 3, Ratio: DefaultBudgetRatio, MinPerSecond: DefaultBudgetMinPerSecond,
		Window: DefaultBudgetWindow}
	first, second := rule, rule
	first.Deposits = 1
	second.Unspent, second.Epoch = 2, 42
	if diff := cmp.Diff([]BudgetSettlement{first, second}, got); diff != "" {
		t.Errorf("settlements (-want +got):\n%s", diff)
	}
}

func TestBudgetStoreValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     func(b *Budget)
		wantErr bool
	}{
		{name: "defaults", set: func(*Budget) {}},
		{name: "all set", set: func(b *Budget) { b.Lease, b.SettleEvery, b.StoreTimeout = 1, time.Second, time.Millisecond }},
		{name: "negative Lease", set: func(b *Budget) { b.Lease = -1 }, wantErr: true},
		{name: "negative SettleEvery", set: func(b *Budget) { b.SettleEvery = -time.Millisecond }, wantErr: true},
		{name: "negative StoreTimeout", set: func(b *Budget) { b.StoreTimeout = -1 }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &Budget{Store: &fakeStore{}}
			tt.set(b)
			err := b.validate()
			if got := errors.Is(err, ErrInvalidPolicy); got != tt.wantErr {
				t.Errorf("validate() = %v; wraps ErrInvalidPolicy: %v, want %v", err, got, tt.wantErr)
			}
		})
	}
}

// BenchmarkBudgetStore measures a first attempt and a retry through a
// Budget that leases from an in-memory store: the cost of leasing itself.
func BenchmarkBudgetStore(b *testing.B) {
	store := &fakeStore{stock: 1 << 62}
	bg := Budget{Store: store, Lease: 100}
	b.ReportAllocs()
	for b.Loop() {
		bg.Deposit()
		bg.Withdraw()
	}
	calls, _, _ := store.stats()
	b.ReportMetric(float64(calls)/float64(b.N), "settles/op")
}

// TestBudgetStoreWaitsOnce: a retry that finds another goroutine's
// settlement under way waits for it StoreTimeout at most, then the
// in-process window decides.
func TestBudgetStoreWaitsOnce(t *testing.T) {
	t.Parallel()
	store := &fakeStore{stock: 10, release: make(chan struct{})}
	store.block = func(context.Context) error { <-store.release; return nil }
	t.Cleanup(func() { close(store.release) })
	b, _ := newStoreBudget(store)
	b.StoreTimeout = 20 * time.Millisecond
	b.Deposit() // a settlement that will not answer in time
	began := time.Now()
	ok := b.Withdraw()
	if d := time.Since(began); d > 2*time.Second { // the bound is 20 ms
		t.Errorf("Withdraw took %v waiting on the store", d)
	}
	if !ok {
		t.Error("Withdraw = false; want the in-process window's floor to allow it")
	}
}

// TestBudgetStoreThroughDo: through the retry loop, a fleet's budget
// that is spent ends a call with ReasonBudget, and a store that fails
// never fails a call: the in-process window takes over.
func TestBudgetStoreThroughDo(t *testing.T) {
	t.Parallel()
	fail := func(context.Context) (int, error) { return 0, &StatusError{StatusCode: 503} }
	policy := func(b *Budget) Policy {
		return Policy{MaxAttempts: 3, Budget: b, Rand: func() float64 { return 0 },
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	}
	tests := []struct {
		name         string
		store        *fakeStore
		wantReason   Reason
		wantAttempts int
		wantFallback bool
	}{
		{name: "one retry left in the fleet", store: &fakeStore{stock: 1}, wantReason: ReasonBudget, wantAttempts: 2},
		{name: "store down", store: &fakeStore{fail: errors.New("down")}, wantReason: ReasonMaxAttempts,
			wantAttempts: 3, wantFallback: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _ := newStoreBudget(tt.store)
			var fallbacks atomic.Int32
			b.OnFallback = func(error) { fallbacks.Add(1) }
			_, err := Do(context.Background(), policy(b), fail)
			settled(t, b)
			var rerr *Error
			if !errors.As(err, &rerr) || rerr.Reason != tt.wantReason || rerr.Attempts != tt.wantAttempts {
				t.Errorf("Do = %v; want %s after %d attempts", err, tt.wantReason, tt.wantAttempts)
			}
			if got := fallbacks.Load() > 0; got != tt.wantFallback {
				t.Errorf("fell back: %v, want %v", got, tt.wantFallback)
			}
		})
	}
}

// TestBudgetStoreKeepsTheDeadline: a retry waits on a slow store only for
// the room its sleep leaves in the call's Deadline, never StoreTimeout past
// it. Real time: the store's wait is real.
func TestBudgetStoreKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	store := &fakeStore{release: make(chan struct{})}
	store.block = func(context.Context) error { <-store.release; return nil }
	t.Cleanup(func() { close(store.release) })
	b := &Budget{Store: store, StoreTimeout: 10 * time.Second} // a store that never answers in time
	p := Policy{Budget: b, Deadline: 300 * time.Millisecond, MaxAttempts: 2, Rand: func() float64 { return 0 }}
	began := time.Now()
	_, err := Do(context.Background(), p, func(context.Context) (int, error) {
		return 0, &StatusError{StatusCode: 503}
	})
	took := time.Since(began)
	if err == nil {
		t.Fatal("Do = nil; want the call to fail")
	}
	// The bound is the 300 ms Deadline; before, the retry waited the whole
	// StoreTimeout. A wide margin for a loaded machine.
	if took > 5*time.Second {
		t.Errorf("call took %v with a Deadline of 300 ms: it waited on the store past its Deadline", took)
	}
}
