package retry

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry/internal/wire"
)

// The defaults that a zero [Budget] field takes.
const (
	// DefaultBudgetRatio is the retries earned by each first attempt: retries
	// may add at most 10% to the normal load, as the Google SRE book advises.
	DefaultBudgetRatio = 0.1

	// DefaultBudgetMinPerSecond is the retries allowed per second whatever
	// the traffic, so that a quiet client can still retry.
	DefaultBudgetMinPerSecond = 10.0

	// DefaultBudgetWindow is how far back a Budget remembers first attempts
	// and retries.
	DefaultBudgetWindow = 10 * time.Second
)

// budgetBuckets is the number of slices a Budget's window is cut into: each
// first attempt and retry is forgotten between Window*9/10 and Window after
// it happened.
const budgetBuckets = 10

// Budget caps retries at a share of the first attempts, so that retrying
// cannot multiply the load on a service that is already failing.
//
// Each first attempt deposits Ratio tokens; each retry withdraws one. Over
// the last Window, a retry is allowed while
//
//	retries + 1 <= Ratio*firstAttempts + MinPerSecond*Window.Seconds()
//
// The second term is a floor: a client that sends few requests may still
// make MinPerSecond retries per second on average. With the defaults,
// retries add at most a tenth to the traffic, plus 100 in any 10 seconds.
// The window slides: it is cut into ten slices, and the oldest one is
// forgotten as the Clock moves on.
//
// A retry loop calls [Budget.Deposit] once per call, on its first attempt,
// and [Budget.Withdraw] before each retry, stopping when it returns false.
// To cap the retries of many calls together, for example all the calls to
// one API, give them all the same *Budget through Policy.Budget; a Budget
// only helps when shared.
//
// With a Store, the Budget is shared by every process that uses the same
// store: the rule above then holds across the fleet, and this process
// trades in leases so that calls do not wait on the network (see
// [BudgetStore]).
//
// The zero Budget is ready to use with the defaults; a nil *Budget allows
// every retry. A Budget is safe for concurrent use by multiple goroutines:
// Deposit takes no lock, and Withdraw holds one only to count. Its fields
// must not change, and it must not be copied, after first use.
type Budget struct {
	// Ratio is the tokens deposited per first attempt: 0.1 lets retries
	// add 10% to the traffic. Zero means DefaultBudgetRatio.
	Ratio float64

	// MinPerSecond is the retries always allowed per second of Window,
	// whatever the traffic. Zero means DefaultBudgetMinPerSecond.
	MinPerSecond float64

	// Window is how long first attempts and retries are remembered. Zero
	// means DefaultBudgetWindow.
	Window time.Duration

	// Clock measures the Window, and when to settle with Store. Nil means
	// the real clock. Store calls are always bounded in real time.
	Clock clockwork.Clock

	// Store, when set, holds the budget of every process that shares it,
	// so that the rule holds across a fleet. Nil means this process alone:
	// the Budget is kept in memory. See BudgetStore.
	Store BudgetStore

	// Lease is how many retries this process asks Store for at each
	// settlement, to spend without asking again. Larger leases mean fewer
	// round trips, and retries held idle by one process while another is
	// refused. Zero means DefaultBudgetLease; negative is a configuration
	// error.
	Lease int

	// SettleEvery is how often, at most, this process settles with Store
	// while it has calls: it also settles when its lease is spent. Zero
	// means DefaultBudgetSettleEvery; negative is a configuration error.
	SettleEvery time.Duration

	// StoreTimeout bounds, in real time, how long a retry waits on Store:
	// its own call, through the context given to Store, or another
	// goroutine's; past it, the in-process window decides. Since the wait
	// comes after the retry loop has checked the Deadline, a call may
	// overrun its Deadline by this much. Zero means
	// DefaultBudgetStoreTimeout; negative is a configuration error.
	StoreTimeout time.Duration

	// OnFallback is called with the error each time a call to Store fails
	// (an error, a timeout or an answer out of range), after the Budget
	// has fallen back to its in-process window, for logging and metrics.
	// It may be called from a goroutine of the Budget's own and must not
	// block for long. Nil means none.
	OnFallback func(error)

	once   sync.Once
	origin time.Time     // the start of slice 0, set on first use
	width  time.Duration // the length of a slice, set on first use

	// deposits[s%budgetBuckets] counts the first attempts of slice s. Each
	// word holds the low 32 bits of s above a 32-bit count, so that a
	// Deposit both claims a stale slice and counts in one atomic step.
	deposits [budgetBuckets]atomic.Uint64

	mu      sync.Mutex // protects retries and shared's lease; held to count, never to wait
	retries [budgetBuckets]budgetSlice

	shared budgetShared // the state of the lease from Store; unused without one
}

// budgetSlice counts the retries of one slice of the window.
type budgetSlice struct {
	slice uint64 // which slice of time this count is for
	n     uint64
}

// Deposit records a first attempt, raising the budget by Ratio. Deposit on a
// nil *Budget does nothing.
func (b *Budget) Deposit() {
	if b == nil {
		return
	}
	if b.Store != nil {
		b.depositShared()
	}
	s := b.slice()
	tag := uint64(uint32(s)) << 32
	w := &b.deposits[s%budgetBuckets]
	for {
		old := w.Load()
		next := tag | 1 // the word holds an older slice: start this one
		if old&^math.MaxUint32 == tag {
			if uint32(old) == math.MaxUint32 {
				return // saturated; the budget is as high as it gets
			}
			next = old + 1
		}
		// A goroutine that read the clock a whole Window ago may reset a
		// newer slice here; that loses a few deposits, never allows more
		// retries, and the next Deposit in that slice starts it again.
		if w.CompareAndSwap(old, next) {
			return
		}
	}
}

// Withdraw reports whether the budget allows one more retry now, and counts
// it if so. It returns false, counting nothing, when the retries in the last
// Window have used up the allowance. Withdraw on a nil *Budget returns true.
func (b *Budget) Withdraw() bool {
	if b == nil {
		return true
	}
	return b.withdrawWithin(context.Background(), wire.MaxDuration)
}

// withdrawWithin is Withdraw waiting on the Store for at most d (and
// StoreTimeout), so that a retry's wait for its token and its sleep fit in
// the call's Deadline together, and no longer than ctx, the call's, lasts.
// A wait cut by ctx returns false, counting nothing.
func (b *Budget) withdrawWithin(ctx context.Context, d time.Duration) bool {
	if b.Store != nil {
		return b.withdrawShared(ctx, min(d, b.storeTimeout()))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.withdrawLocked()
}

// withdrawLocked is Withdraw on the in-process window; b.mu is held.
func (b *Budget) withdrawLocked() bool {
	s := b.slice() // read under the lock, so that s never goes back
	var retries uint64
	for _, r := range b.retries {
		if s-r.slice < budgetBuckets {
			retries += r.n
		}
	}
	// A hair of slack, so that rounding cannot take back a retry that
	// Ratio*firstAttempts earned exactly (0.58*50 is 28.999999999999996).
	allowance := b.ratio()*float64(b.firstAttempts(s)) + b.floor() + 1e-9
	if !(float64(retries)+1 <= allowance) { // NaN refuses
		return false
	}
	b.countLocked(s)
	return true
}

// countLocked records a retry in slice s of the in-process window; b.mu is
// held.
func (b *Budget) countLocked(s uint64) {
	r := &b.retries[s%budgetBuckets]
	if r.slice != s {
		*r = budgetSlice{slice: s}
	}
	r.n++
}

// firstAttempts sums the deposits of the window that ends with slice s.
func (b *Budget) firstAttempts(s uint64) uint64 {
	tag := uint32(s)
	var n uint64
	for i := range b.deposits {
		v := b.deposits[i].Load()
		if tag-uint32(v>>32) < budgetBuckets {
			n += uint64(uint32(v))
		}
	}
	return n
}

// slice returns the number of the window slice that holds the present.
func (b *Budget) slice() uint64 {
	b.once.Do(b.start)
	d := b.now().Sub(b.origin)
	if d < 0 { // a clock that went back: count it in the first slice
		return 0
	}
	return uint64(d / b.width)
}

func (b *Budget) start() {
	b.origin = b.now()
	b.width = max(b.window()/budgetBuckets, 1)
}

func (b *Budget) now() time.Time { return wire.Now(b.Clock) }

func (b *Budget) ratio() float64 {
	if b.Ratio == 0 {
		return DefaultBudgetRatio
	}
	return b.Ratio
}

// floor returns the retries allowed in a window whatever the traffic.
func (b *Budget) floor() float64 {
	return b.minPerSecond() * b.window().Seconds()
}

// window returns the Window, or its default when it is zero or, in a Budget
// that was never validated, negative.
func (b *Budget) window() time.Duration {
	if b.Window <= 0 {
		return DefaultBudgetWindow
	}
	return b.Window
}

// validate reports a Budget that cannot be used: a negative, NaN or
// infinite Ratio or MinPerSecond, or a negative Window, Lease, SettleEvery
// or StoreTimeout.
func (b *Budget) validate() error {
	if b == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"Ratio", b.Ratio}, {"MinPerSecond", b.MinPerSecond}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: Budget.%s is %v; it must be a finite number, not negative",
				ErrInvalidPolicy, f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Window", b.Window}, {"SettleEvery", b.SettleEvery}, {"StoreTimeout", b.StoreTimeout}} {
		if f.v < 0 {
			return fmt.Errorf("%w: Budget.%s is %v; it must not be negative", ErrInvalidPolicy, f.name, f.v)
		}
	}
	if b.Lease < 0 {
		return fmt.Errorf("%w: Budget.Lease is %d; it must be at least 1 retry (0 means %d)",
			ErrInvalidPolicy, b.Lease, DefaultBudgetLease)
	}
	return nil
}
