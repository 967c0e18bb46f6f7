package retry

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/wire"
)

// The defaults of the fields of a [Budget] that shares its state through a
// [BudgetStore].
const (
	// DefaultBudgetLease is the retries a process asks its BudgetStore for
	// at each settlement.
	DefaultBudgetLease = 20

	// DefaultBudgetSettleEvery is how often, at most, a process settles
	// with its BudgetStore while it has calls.
	DefaultBudgetSettleEvery = 100 * time.Millisecond

	// DefaultBudgetStoreTimeout bounds one call to a BudgetStore: a retry
	// never waits longer than this on the store.
	DefaultBudgetStoreTimeout = 50 * time.Millisecond
)

// BudgetStore holds a [Budget] shared by many processes, so that the
// Budget's rule holds across all of them: with a hundred processes, the
// MinPerSecond floor is the fleet's, not each one's.
//
// A process does not ask the store for every retry. It settles with it
// now and then: it reports the first attempts it made since its last
// settlement, hands back the retries it did not spend of its last lease,
// and receives a new lease of retries to spend locally until the next
// settlement. A lease granted counts as retries spent until it is handed
// back, so processes together never get more than the rule allows.
//
// While the store fails (an error, an answer out of range, or no answer
// within StoreTimeout), each process falls back to its own in-process
// window, in which the retries it spent from its leases still count, and
// asks the store again every SettleEvery, in the background.
//
// Settle must be safe for concurrent use, and should return once ctx, which
// carries the Budget's StoreTimeout, is done: the Budget stops waiting then
// anyway. ctx also ends, sooner, with the call of a retry that waits for
// the settlement, when that call is cancelled. The retryredis module has a
// BudgetStore on Redis.
type BudgetStore interface {
	Settle(ctx context.Context, s BudgetSettlement) (BudgetLease, error)
}

// BudgetSettlement is what a process reports to its [BudgetStore].
type BudgetSettlement struct {
	// Deposits is the first attempts made since the last settlement.
	Deposits int64

	// Unspent is the retries of the last lease that were not spent,
	// handed back; zero if there are none.
	Unspent int64

	// Epoch is the tag of the lease Unspent belongs to, as the store
	// returned it in BudgetLease.Epoch.
	Epoch int64

	// Want is the retries asked for the new lease: the Budget's Lease.
	Want int64

	// Ratio is the Budget's Ratio, its default resolved. Every process
	// that shares a store must use the same rule.
	Ratio float64

	// MinPerSecond is the Budget's MinPerSecond, its default resolved: the
	// floor of the whole fleet.
	MinPerSecond float64

	// Window is the Budget's Window, its default resolved.
	Window time.Duration
}

// BudgetLease is what a [BudgetStore] grants: retries a process may spend
// until its next settlement.
type BudgetLease struct {
	// Retries is how many, from 0 (the budget is spent) to the Want asked.
	Retries int64

	// Epoch tags the lease for the store, which takes back what was not
	// spent of it at the next settlement. It is the store's own: the
	// Budget hands it back unchanged.
	Epoch int64
}

// budgetShared is the state of a Budget that trades with a BudgetStore.
type budgetShared struct {
	pending atomic.Int64 // first attempts not settled yet
	due     atomic.Int64 // Clock time, in Unix nanoseconds, from which Deposit settles

	// These are protected by Budget.mu.
	lease    int64         // retries left to spend
	epoch    int64         // the store's tag of the lease
	full     bool          // the last lease was all that was asked: ask again once it is spent
	fallback bool          // the last store call failed: the in-process window decides
	expires  time.Time     // when the lease, or the fallback, must be settled again
	inflight chan struct{} // closed when the settlement under way ends; nil when none is
}

// depositShared counts a first attempt for the next settlement, and starts
// one in the background when it is due, so that the lease stays fresh
// without a call ever waiting on the store.
func (b *Budget) depositShared() {
	sh := &b.shared
	sh.pending.Add(1)
	if b.now().UnixNano() < sh.due.Load() {
		return
	}
	b.mu.Lock()
	b.settleInBackgroundLocked(context.Background())
	b.mu.Unlock()
}

// settleInBackgroundLocked starts a settlement in a goroutine of its own,
// ended by ctx (see settle), unless one is under way; b.mu is held.
func (b *Budget) settleInBackgroundLocked(ctx context.Context) {
	if b.shared.inflight != nil {
		return
	}
	req, done := b.beginSettleLocked()
	go b.settle(ctx, req, done)
}

// withdrawShared is Withdraw with a Store: it spends the lease; when the
// lease is spent or stale it settles, or waits for the settlement under
// way, for wait at most in all, after which the in-process window decides;
// while the store fails, the in-process window decides at once. A caller
// whose ctx ends stops waiting then, and is refused: it has gone.
func (b *Budget) withdrawShared(ctx context.Context, wait time.Duration) bool {
	sh := &b.shared
	limit := time.Now().Add(wait) // real time, as the store's
	for round := 0; ; round++ {
		b.mu.Lock()
		stale := !b.now().Before(sh.expires)
		if sh.fallback {
			ok := b.withdrawLocked()
			if stale {
				// Try the store again, but let no retry wait on a store
				// that just failed.
				b.settleInBackgroundLocked(context.Background())
			}
			b.mu.Unlock()
			return ok
		}
		if sh.lease > 0 && !stale {
			sh.lease--
			b.countLocked(b.slice()) // so that a fallback knows of it
			b.mu.Unlock()
			return true
		}
		// A lease cut short means the fleet's budget is spent: refuse
		// until the next settlement rather than ask at every retry. A full
		// lease that other goroutines spent first is asked for once more.
		if round == 2 || (!stale && !sh.full && sh.inflight == nil) {
			b.mu.Unlock()
			return false
		}
		// Settle, or join the settlement under way, in the background,
		// so that this retry stops waiting at its limit whatever the
		// store does, and the store call keeps its whole StoreTimeout,
		// unless this caller, who began it, goes.
		b.settleInBackgroundLocked(ctx)
		wait := sh.inflight
		b.mu.Unlock()
		if !waitUntil(ctx, wait, limit) {
			if ctx.Err() != nil {
				return false
			}
			// The store is slow to answer: decide here, as in a
			// fallback, rather than hold the retry up longer.
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.withdrawLocked()
		}
	}
}

// waitUntil waits for ch to close, until the real time limit or the end
// of ctx at most, and reports whether it did.
func waitUntil(ctx context.Context, ch <-chan struct{}, limit time.Time) bool {
	t := time.NewTimer(time.Until(limit))
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// beginSettleLocked claims the next settlement, handing back what is left
// of the lease, and returns what to send the store and the channel to close
// when it ends; b.mu is held and no settlement is under way.
func (b *Budget) beginSettleLocked() (BudgetSettlement, chan struct{}) {
	sh := &b.shared
	req := BudgetSettlement{
		Deposits: sh.pending.Swap(0), Want: int64(b.lease()),
		Ratio: b.ratio(), MinPerSecond: b.minPerSecond(), Window: b.window(),
	}
	if !sh.fallback {
		req.Unspent, req.Epoch = sh.lease, sh.epoch
	}
	sh.lease = 0
	sh.inflight = make(chan struct{})
	// Deposits need not try again while this settlement runs.
	sh.due.Store(b.now().Add(b.storeTimeout()).UnixNano())
	return req, sh.inflight
}

// settle makes the settlement begun by beginSettleLocked and closes done.
// ctx is that of the caller who waits for it, or the background: a
// settlement cut by its caller's end is not the store's failure, and the
// next withdrawal settles again.
func (b *Budget) settle(ctx context.Context, req BudgetSettlement, done chan struct{}) {
	got, err := b.callStore(ctx, req)
	cut := err != nil && ctx.Err() != nil
	sh := &b.shared
	b.mu.Lock()
	// Deposits and retries handed back with a failed or cut call are not
	// sent again: the store may have counted them, and counting them twice
	// would allow retries that were not earned.
	if !cut {
		sh.fallback = err != nil
	}
	sh.lease, sh.epoch, sh.full = got.Retries, got.Epoch, got.Retries == req.Want
	sh.expires = b.now()
	if !cut {
		sh.expires = sh.expires.Add(b.leaseLife())
	}
	sh.due.Store(sh.expires.UnixNano())
	sh.inflight = nil
	b.mu.Unlock()
	if err != nil && !cut && b.OnFallback != nil {
		b.OnFallback(err)
	}
	close(done) // last, so that a waiter sees the fallback reported
}

// callStore calls Store.Settle for StoreTimeout at most, and no longer
// than ctx lasts, and checks its answer.
func (b *Budget) callStore(ctx context.Context, req BudgetSettlement) (BudgetLease, error) {
	var got BudgetLease
	err := wire.CallWithin(ctx, b.storeTimeout(), func(ctx context.Context) (err error) {
		got, err = b.Store.Settle(ctx, req)
		return err
	})
	switch {
	case err != nil:
		return BudgetLease{}, fmt.Errorf("retry: Budget.Store failed: %w", err)
	case got.Retries < 0 || got.Retries > req.Want:
		return BudgetLease{}, fmt.Errorf("retry: Budget.Store granted %d retries when %d were asked",
			got.Retries, req.Want)
	}
	return got, nil
}

// leaseLife is how long a lease may be spent: SettleEvery, but at most half
// the Window, so that the store still counts the lease when what is left
// of it is handed back.
func (b *Budget) leaseLife() time.Duration {
	life := b.SettleEvery
	if life <= 0 {
		life = DefaultBudgetSettleEvery
	}
	return max(min(life, b.window()/2), 1)
}

func (b *Budget) lease() int {
	if b.Lease <= 0 {
		return DefaultBudgetLease
	}
	return b.Lease
}

func (b *Budget) storeTimeout() time.Duration {
	if b.StoreTimeout <= 0 {
		return DefaultBudgetStoreTimeout
	}
	return b.StoreTimeout
}

func (b *Budget) minPerSecond() float64 {
	if b.MinPerSecond == 0 {
		return DefaultBudgetMinPerSecond
	}
	return b.MinPerSecond
}
