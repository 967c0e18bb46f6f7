package pace

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/wire"
)

// The concurrency limit. An overloaded server says so without any
// rate-limit header: a 529, a 503, or an overloaded_error event at the
// start of a stream. From the first such answer on, a key has a limit on
// the requests in flight, learned from the answers alone
// (docs/pacing.md has the reasons and the measurements):
//
//   - It starts at one and doubles each round trip while the limit is full
//     and nothing is refused (slow start). A round trip is a limit's worth
//     of successes of requests sent since the limit last changed.
//   - A refusal of a rise (the limit above the last level that held, safe)
//     takes the limit back a step below safe: the rise found the server's
//     capacity. Rises come after spacing round trips at the limit, spacing
//     doubling with each refused rise, but never more than maxProbeEvery
//     successes apart: a server at its capacity is probed once in that
//     many requests, whatever the limit and the number of processes, and
//     one whose capacity grew is found within them. A rise that holds
//     makes safe the new limit, and the next rise comes a round trip
//     later, twice as large, up to a quarter of the limit.
//   - A refusal at or below safe means the server lost capacity, or
//     others took it: the limit falls to deepCut percent of what was in
//     flight. Processes that share a server, each with its own limit, so
//     give way to each other; the limit climbs back to safe one step a
//     round trip.
//   - One cut per round trip: the refusal of a request sent before the
//     last cut does not cut again. After any refusal, nothing is sent for
//     about the time a slot of the server takes to free (cool): sooner, a
//     request would meet the same refusal. Refusals before the first
//     success under the limit are of the load sent before it, and teach
//     nothing.
//   - A server that states its limit in the IETF RateLimit fields, as a
//     quota of unit "concurrent-requests", sets it: it is not learned.
//
// A request beyond the limit waits for a slot, first come, first served
// (retry.Queued). A slot is held from the attempt's start to its response
// headers, or, for an event stream, until its body ends or is closed. The
// limiter lives in its key, under the key's lock.

// maxProbeEvery bounds the successes between two rises of the limit of a
// server at its capacity. Each refused rise costs one refusal, so about
// one request in maxProbeEvery is refused there; and a server whose
// capacity grew waits that long to be found.
const maxProbeEvery = 160

// maxSpacing bounds the round trips between two rises of a limit so small
// that maxProbeEvery successes take longer: a process that shares a server
// with others, at a small share of it, still finds capacity that others
// leave.
const maxSpacing = 32

// deepCut is the percentage of the requests in flight that a refusal at a
// level that held leaves.
const deepCut = 70

// blindCool is the first pause after a refusal while no success under the
// limit has yet shown how long a slot is held.
const blindCool = 25 * time.Millisecond

// maxHoldSample bounds the time in a slot that counts in the mean time a
// slot is held.
const maxHoldSample = 5 * time.Minute

// maxLimit bounds a learned limit. It rises only while full, so only
// callers many enough to fill it bring it near.
const maxLimit = 1 << 16

// limiter is a key's concurrency limit and the requests in it. Its key's
// mu protects it.
type limiter struct {
	limit    int           // requests that may be in flight
	safe     int           // the highest limit known to hold: the limit climbs back to it fast
	inflight int           // slots held
	queue    []*paceTicket // waiting for a slot, first come, first served
	good     int           // successes of full-limit requests since the limit last changed
	spacing  int           // round trips at the limit between rises above safe
	step     int           // the last rise above safe: it doubles while rises hold
	gen      uint64        // counts the changes of the limit: a request's slot records it
	cut      uint64        // gen after the last cut: refusals of requests sent before count no more
	from     uint64        // gen of the request whose refusal made the last cut
	over     int           // the limit the last cut's refusals allow: one less for each
	cool     int64         // after a refusal, nothing is sent until then: the server is full now
	blind    int64         // the last pause after a refusal, while no success has timed a slot
	slow     bool          // slow start: the limit doubles each round trip until the first cut
	probing  bool          // the limit rose above safe and no round trip has confirmed it yet
	seen     bool          // a request under the limit has succeeded: refusals count from then
	stated   bool          // the server states the limit: it is not learned
	hold     int64         // nanoseconds a success holds its slot, a moving mean; 0 when unknown
}

func newLimiter() *limiter { return &limiter{limit: 1, safe: 1, spacing: 1, slow: true} }

// take gives t a slot if one is free and no one waits for it.
func (c *limiter) take(t *paceTicket, now int64) bool {
	if c.inflight >= c.limit || len(c.queue) > 0 {
		return false
	}
	c.occupy(t, now)
	t.full = c.inflight >= c.limit
	return true
}

// occupy gives t a slot at now.
func (c *limiter) occupy(t *paceTicket, now int64) {
	c.inflight++
	t.slot, t.since, t.held, t.gen = true, now, c.inflight, c.gen
}

// enqueue puts t at the end of the queue and returns the channel closed
// when it has a slot, and how long that is expected to take.
func (c *limiter) enqueue(t *paceTicket) (chan struct{}, time.Duration) {
	t.turn = make(chan struct{})
	c.queue = append(c.queue, t)
	return t.turn, time.Duration(int64(len(c.queue)) * c.hold / int64(c.limit))
}

// leave takes t, which gave up its place, out of the queue.
func (c *limiter) leave(t *paceTicket) {
	if i := slices.Index(c.queue, t); i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
	}
	t.turn = nil
}

// admit hands the free slots to the requests that wait, in order.
func (c *limiter) admit(now int64) {
	for c.inflight < c.limit && len(c.queue) > 0 {
		t := c.queue[0]
		c.queue = slices.Delete(c.queue, 0, 1)
		c.occupy(t, now)
		t.full = true // it waited: the limit held it back
		close(t.turn)
		t.turn = nil
	}
}

// release frees a slot whose request was sent at since, and hands it on.
// A success's time in the slot teaches how long the server holds one; a
// time out of range (a clock that stepped, a stream kept open for an
// hour) teaches nothing.
func (c *limiter) release(since, now int64, success bool) {
	c.inflight--
	if d := now - since; success && d > 0 && d <= int64(maxHoldSample) {
		if c.hold == 0 {
			c.hold = d
		} else {
			c.hold += (d - c.hold) / 8
		}
	}
	c.admit(now)
}

// refused learns from the refusal at now of t's request, which held a
// slot.
func (c *limiter) refused(t *paceTicket, now int64) {
	// A slot of the server frees about every hold/limit: sooner, a request
	// would meet the same refusal. Before any success has timed a slot,
	// the pause doubles with each refusal.
	if c.hold > 0 {
		c.cool = max(c.cool, now+min(c.hold/int64(c.limit), int64(time.Second)))
	} else {
		c.blind = min(max(2*c.blind, int64(blindCool)), int64(time.Second))
		c.cool = max(c.cool, now+c.blind)
	}
	if !c.seen || c.stated {
		return
	}
	if t.gen == c.from && c.cut > c.from {
		// Another of the requests sent at the level that was cut: the
		// level was one more over the server's capacity.
		c.over--
		c.limit = max(1, min(c.limit, c.over))
		return
	}
	if t.gen < c.cut {
		return // sent before the cut, which it cannot add to
	}
	c.from, c.over = t.gen, c.limit-1
	at := min(c.limit, t.held)
	switch {
	case c.slow:
		// The doubling was too much, by as many as are refused; the level
		// before it held.
		c.safe = max(1, c.limit/2)
		c.limit = max(1, c.over)
		c.spacing = 2
	case c.limit > c.safe:
		// A rise was one too many: back below the level that held.
		c.spacing = min(2*c.spacing, maxSpacing)
		c.limit = max(1, c.safe-max(1, c.safe/16))
	default:
		// A level that held no longer does: the server lost capacity, or
		// others took it.
		c.safe = max(1, at-1)
		c.limit = max(1, at*deepCut/100)
	}
	c.gen++
	// Out of slow start, the limit is a rise until a round trip confirms it.
	c.probing, c.step = c.slow && c.limit > c.safe, 1
	c.slow, c.good, c.cut = false, 0, c.gen
}

// succeeded learns from the success of t's request, which held a slot.
// Only a request the limit held back, or that filled it, and that was sent
// at the limit as it is now, says the limit holds.
func (c *limiter) succeeded(t *paceTicket, now int64) {
	c.seen = true
	if !t.full || c.stated || t.gen != c.gen {
		return
	}
	c.good++
	if c.good < c.limit {
		return // a round trip is a limit's worth of successes
	}
	switch {
	case c.slow:
		c.raise(2*c.limit, now)
	case c.limit < c.safe:
		c.raise(c.limit+1, now)
	case c.probing:
		// A round trip at the new limit went by without a refusal: the
		// server took it. Climb on.
		c.safe, c.spacing = c.limit, 1
		c.step = min(2*c.step, max(1, c.limit/4))
		c.raise(c.limit+c.step, now)
	case c.good >= min(c.spacing*c.limit, maxProbeEvery):
		c.step = 1
		c.raise(c.limit+1, now)
		c.probing = true
	}
}

// served learns from the success of a request sent before the key had a
// limit: in slow start, the server took it alongside those that were
// refused, and the limit may be one more.
func (c *limiter) served(now int64) {
	if c.slow {
		c.raise(c.limit+1, now)
	}
}

func (c *limiter) raise(limit int, now int64) {
	c.gen++
	c.limit, c.good = min(limit, maxLimit), 0
	c.admit(now)
}

// state sets the limit a server stated.
func (c *limiter) state(limit float64, now int64) {
	c.gen++
	c.limit = max(1, int(min(limit, maxLimit)))
	c.safe = c.limit
	c.stated, c.slow, c.probing, c.good = true, false, false, 0
	c.admit(now)
}

// overloaded reports an answer that says the server is overloaded, by
// Pacer.Overloaded: its status, or, for an event stream's error event, the
// status the event stands for.
func (p *Pacer) overloaded(resp *http.Response, err error) bool {
	code := 0
	if err != nil {
		if se, ok := errors.AsType[*retry.StreamError](err); ok {
			code = se.Status
		}
	} else if resp != nil {
		code = resp.StatusCode
	}
	if code < 400 {
		return false
	}
	if p.Overloaded != nil {
		return p.Overloaded(code)
	}
	return code == http.StatusServiceUnavailable || code == wire.StatusOverloaded
}

// streamed reports a response whose body is an event stream: the server
// is busy with it until it ends.
func streamed(resp *http.Response) bool {
	if resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	ct := resp.Header.Get("Content-Type")
	const mt = "text/event-stream"
	return len(ct) >= len(mt) && strings.EqualFold(ct[:len(mt)], mt)
}

// slotBody is the body of an event stream that holds a slot of its key's
// limit: the slot is freed when the body ends, fails or is closed.
type slotBody struct {
	io.ReadCloser
	k     *paceKey
	since int64
	clock clockwork.Clock
	done  atomic.Bool
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.free()
	}
	return n, err
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.free()
	return err
}

func (b *slotBody) free() {
	if b.done.CompareAndSwap(false, true) {
		k := b.k
		k.mu.Lock()
		k.conc.release(b.since, pacerNow(b.clock), true)
		k.mu.Unlock()
	}
}

// limitStored puts t, whose wait of wait the Store set, under k's
// concurrency limit, if k has one: the limit is each process's own. It
// returns the wait, which the limit's pause after a refusal may lengthen.
func (p *Pacer) limitStored(t *paceTicket, k *paceKey, wait time.Duration, clock clockwork.Clock) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conc == nil {
		return wait
	}
	t.k, t.store = k, true
	k.inflight++
	if wait <= 0 {
		wait, _ = k.grant(t, 0, pacerNow(clock))
	}
	return wait
}

// admits reports that t may go as far as k's concurrency limit says, giving
// it a slot when it needs one and one is free. When it says no, the
// Transport asks for t's turn (see turn). k.mu is held.
func (k *paceKey) admits(t *paceTicket, now int64) bool {
	c := k.conc
	return c == nil || t.slot || c.take(t, now)
}

// turn is t's place in the queue for a slot under its key's concurrency
// limit: nil when t may go, else the channel closed when it gets one, and
// how long that is expected to take.
func (p *Pacer) turn(t *paceTicket, clock clockwork.Clock) (chan struct{}, time.Duration) {
	k := t.k
	if k == nil || !k.limited.Load() {
		return nil, 0 // no limit: no lock
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.conc
	if c == nil || t.slot || t.sent {
		return nil, 0
	}
	if now := pacerNow(clock); c.take(t, now) {
		k.send(t, now)
		return nil, 0
	}
	return c.enqueue(t)
}

// limit teaches k's concurrency limit what the answer to t's attempt said
// at now, and frees t's slot, or, for an event stream, leaves it to the
// stream's end.
func (p *Pacer) limit(k *paceKey, t *paceTicket, resp *http.Response, err error, over bool, o *rateObs, clock clockwork.Clock, now int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.conc
	if c == nil {
		if !over && o.concurrent == 0 {
			return // the key has no limit, and this answer sets none
		}
		c = newLimiter()
		k.conc = c
		k.limited.Store(true)
		p.limited.Store(true)
	}
	if o.concurrent > 0 {
		c.state(o.concurrent, now)
	} else if c.stated {
		c.stated = false // a server that no longer states it: the limit is learned from here
	}
	ok := err == nil && resp.StatusCode < 400
	if !t.slot {
		if ok {
			c.served(now) // a request sent before the limit was
		}
		return
	}
	t.slot = false
	switch {
	case over:
		c.refused(t, now)
	case ok:
		c.succeeded(t, now)
		if streamed(resp) {
			resp.Body = &slotBody{ReadCloser: resp.Body, k: k, since: t.since, clock: clock}
			return
		}
	}
	c.release(t.since, now, ok)
}
