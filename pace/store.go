package pace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/wire"
)

// DefaultStoreTimeout bounds one call to a Store when
// Pacer.StoreTimeout is zero: no attempt waits longer than this on the
// store before it, nor after its response.
const DefaultStoreTimeout = 50 * time.Millisecond

// pacerStoreRetry is how long a Pacer whose store failed paces from its own
// buckets before it asks the store again: one attempt in this time pays for
// the check, at most StoreTimeout.
const pacerStoreRetry = time.Second

// Store holds the buckets of a [Pacer] shared by many processes, so
// that every process on one API key paces by the same limits and the same
// queue: with four processes, each does not spend the whole quota as if it
// were alone.
//
// Each process still reads the rate-limit headers itself, with its own
// Pacer; the store keeps, per key and dimension (requests, tokens), the
// bucket the fleet reserves from, and the Retry-After that holds every
// caller of the key. Reserve is called before every attempt, and Learn
// after every response that carries rate-limit headers or a Retry-After.
// Times are the store's own (a Redis server's TIME, for one), so the
// processes' clocks need not agree: only durations cross.
//
// The model is the in-process Pacer's. A reservation takes one request, and
// its cost in tokens, from the key's buckets, which refill as the server's
// format says, and the caller waits while they are below zero, first come,
// first served. The grant carries, for each bucket, a mark: where the
// bucket would stand once the request is sent. Learn gets the mark back
// with the server's remaining count, and the store moves the bucket down by
// what the server has less than the mark said (less what earlier reports
// corrected since), never up: so requests of the fleet still in flight are
// not counted twice. A caller states the longest wait it would accept (the
// time left to its call): a reservation that would wait longer takes
// nothing, so that callers who cannot wait never lengthen the queue of
// those who can. A caller cancelled during its wait does not hand its
// reservation back: the fleet errs slow.
//
// When the store fails (an error, or no answer within StoreTimeout), the
// process paces from its own buckets, which have learned from every
// response it saw, and asks the store again a second later. Both methods
// must be safe for concurrent use and should return once ctx is done: it
// ends after StoreTimeout, or sooner with the request's own context (a
// caller who cancels), whose values it carries. The retryredis module has
// a Store on Redis.
type Store interface {
	// Reserve takes one request, and tokens (0 when none are counted),
	// from key's buckets and returns how long the caller must wait. When
	// that wait would be maxWait or longer, it takes nothing and returns
	// the wait: the caller gives up. A key the store knows nothing of
	// grants at once.
	Reserve(ctx context.Context, key string, tokens float64, maxWait time.Duration) (Grant, error)

	// Learn moves key's buckets to what a server reported.
	Learn(ctx context.Context, key string, r Report) error
}

// Grant is a [Store]'s answer to a reservation.
type Grant struct {
	// Wait is how long the caller must wait before it sends: zero or more.
	Wait time.Duration

	// RetryAfter says the wait honours a Retry-After the key's server
	// sent.
	RetryAfter bool

	// Requests and Tokens mark the reservation in each bucket, for the
	// store to read back in Learn.
	Requests, Tokens Mark
}

// Mark is where one reservation left a shared bucket, for the store
// to compare the server's count with when the response comes: the level
// the bucket would have just after the request is sent, what corrections
// had moved the bucket by then, and the bucket's epoch, which the store
// changes when levels can no longer be compared (a new limit, a new
// window). Its meaning is the store's: the Pacer hands it back unchanged.
type Mark struct {
	Level     float64 // the bucket's level once the request is sent
	Corrected float64 // the store's corrections of the bucket, in all, by then
	Epoch     int64   // the bucket's epoch then; 0: no mark
}

// Report is what a response said about a key's limits, for
// [Store.Learn]. The Pacer derives refill rates and windows from what
// it saw, so the store need not parse any header.
type Report struct {
	// Requests and Tokens are the two dimensions; a Limit of 0 means the
	// response said nothing of that one.
	Requests, Tokens Limit

	// Block, when positive, holds every caller of the key for that long
	// from now: the server's Retry-After, jittered.
	Block time.Duration
}

// Limit is one dimension of a [Report].
type Limit struct {
	// Limit is the bucket's size, or the window's quota; 0 when nothing
	// was said.
	Limit float64

	// Remaining is what the server said is left now.
	Remaining float64

	// Rate is how fast a token bucket refills, in units per second. Zero
	// for a fixed window.
	Rate float64

	// Window is a fixed window's length, and Reset the time until the
	// current one ends; the whole Limit returns then. Zero for a token
	// bucket.
	Window, Reset time.Duration

	// Mark is the mark the reservation got from Reserve, or the zero
	// Mark when it was not the store's.
	Mark Mark
}

// storeOn reports whether the Pacer should ask its store now: it has one,
// and the store has not failed in the last pacerStoreRetry.
func (p *Pacer) storeOn() bool {
	return p.Store != nil && time.Now().UnixNano() >= p.storeOff.Load()
}

// storeFailed records that the store failed, given room to answer and
// the caller's ctx: the Pacer paces on its own for a while. A store cut
// short by the call's own deadline (room, shorter than StoreTimeout) or by
// the end of ctx (the caller's cancel) has not failed: that call paces on
// its own, or ends, and the others go on asking.
func (p *Pacer) storeFailed(ctx context.Context, err error, room time.Duration) {
	if room < p.storeTimeout() && errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		return
	}
	p.storeOff.Store(time.Now().Add(pacerStoreRetry).UnixNano())
	if p.OnFallback != nil {
		p.OnFallback(err)
	}
}

// storeReserve asks the store for req's place, room being the longest
// wait the call can take. It reports false when the store failed; the
// caller then reserves locally.
func (p *Pacer) storeReserve(t *paceTicket, req *http.Request, cost float64, room time.Duration) (time.Duration, bool, bool) {
	key := p.storeKey(req)
	var g Grant
	err := p.callStore(req.Context(), room, func(ctx context.Context) (err error) {
		g, err = p.Store.Reserve(ctx, key, cost, room)
		return err
	})
	if err == nil && (g.Wait < 0 || math.IsNaN(g.Requests.Level) || math.IsNaN(g.Tokens.Level)) {
		err = fmt.Errorf("a wait of %v", g.Wait)
	}
	if err != nil {
		p.storeFailed(req.Context(), fmt.Errorf("retry: Pacer.Store.Reserve failed: %w", err), room)
		return 0, false, false
	}
	*t = paceTicket{marks: [2]Mark{g.Requests, g.Tokens}} // k stays nil: nothing local to give back
	return g.Wait, g.RetryAfter, true
}

// storeLearn reports what a response said to the store.
// r comes by value: the call's goroutine holds it, and a pointer would move
// every response's report to the heap, store or not.
func (p *Pacer) storeLearn(req *http.Request, r Report, room time.Duration) {
	key := p.storeKey(req)
	err := p.callStore(req.Context(), room, func(ctx context.Context) error { return p.Store.Learn(ctx, key, r) })
	if err != nil {
		p.storeFailed(req.Context(), fmt.Errorf("retry: Pacer.Store.Learn failed: %w", err), room)
	}
}

// callStore runs f bounded by StoreTimeout and room, the time left to the
// call, and ended by ctx, the caller's: a caller who cancels does not wait
// for the store (see callWithin).
func (p *Pacer) callStore(ctx context.Context, room time.Duration, f func(context.Context) error) error {
	return wire.CallWithin(ctx, min(p.storeTimeout(), room), f)
}

func (p *Pacer) storeTimeout() time.Duration {
	if p.StoreTimeout <= 0 {
		return DefaultStoreTimeout
	}
	return p.StoreTimeout
}

// validate reports a Pacer that cannot work.
// Validate reports a Pacer that cannot be used: a negative StoreTimeout. A
// Transport asks it before the first attempt of every call.
func (p *Pacer) Validate() error {
	if p != nil && p.StoreTimeout < 0 {
		return fmt.Errorf("%w: Pacer.StoreTimeout is %v; it must not be negative", retry.ErrInvalidPolicy, p.StoreTimeout)
	}
	return nil
}

// storeKey is req's key as every process names it: Key's, or the host and
// a digest of the credential. The in-process hash is seeded per process,
// and the credential itself must not be written to the store.
func (p *Pacer) storeKey(req *http.Request) string {
	if p.Key != nil {
		return p.Key(req)
	}
	host := wire.Host(req)
	vs, _ := credential(req.Header)
	if len(vs) == 0 {
		return host
	}
	h := sha256.New()
	for _, v := range vs {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return host + "#" + hex.EncodeToString(h.Sum(nil)[:12])
}

// report describes b, as just taught by an observation at now that said
// remaining, for a store.
func (b *bucket) report(remaining float64, mark Mark, now int64) Limit {
	l := Limit{Limit: b.limit, Remaining: remaining, Mark: mark}
	switch b.kind {
	case kindBucket:
		l.Rate = b.rate
	case kindWindow:
		l.Window, l.Reset = b.window, max(time.Duration(b.resetAt-now), 0)
	default:
		return Limit{}
	}
	return l
}
