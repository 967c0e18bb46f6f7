package pace

import (
	"math"
	"time"

	"github.com/retrykit/retry/internal/wire"
)

// bucket is the Pacer's model of one dimension (requests or tokens) of one
// key's limit, as the server reports it.
//
// Its level is what the server will grant at time at, minus what callers
// of this Pacer have reserved since; it goes negative when callers queue,
// and a caller waits until refills bring the level back to zero at its
// place in the queue. That is golang.org/x/time/rate's reservation model:
// first come, first served, and a waiter's time is known when it arrives.
// rate.Limiter itself cannot serve here: its level cannot be set to the
// remaining count a server reports (only its rate and burst can change),
// it cannot be a fixed window, its times come from time.Now or explicit
// arguments but never from a clockwork.Clock, and the library's go.mod
// takes no dependency.
type bucket struct {
	kind   limitKind // kindNone: nothing learned; then the dimension is not paced
	limit  float64   // the bucket's size, or the window's quota
	level  float64   // at time at; negative: reserved ahead of refills
	sent   float64   // at time at: the level counting only the requests sent, as the server counts
	total  float64   // the units sent, in all: what was sent after a snapshot is total less its own
	queued float64   // the units reserved and not yet sent: the debt a new window repays
	at     int64     // Unix nanoseconds of the last advance

	// origin is the level the bucket began with, for the answers to
	// requests sent before it was known (see learn).
	origin snapshot

	// kindBucket: the refill rate in units per second, and the reset it
	// was estimated from (a longer one is less hurt by rounding) and when.
	rate      float64
	rateBasis time.Duration
	rateAt    int64

	// kindWindow: when the current window ends, and how long one lasts.
	// The IETF fields state the length (w). Other servers of fixed windows
	// do not: it is the longest reset seen plus its rounding (erring late),
	// or, when windows have passed unseen, the least gap between two
	// windows' ends as the server dates them. A gap no longer than the
	// rounding of the ends, or shorter than a reset seen, is the same
	// window reported twice, not a window (servers that report the current
	// second plus a rounded time to live make ends wobble by a second).
	resetAt int64
	window  time.Duration
	stated  bool          // window came from the format: nothing refines it
	guessed bool          // resetAt is a guess: the window began at the last end, and its length is not known
	dated   bool          // resetAt comes from a response in this window, not from the last window's end
	longest time.Duration // the longest reset seen, plus its rounding
	gap     time.Duration // the least gap between two ends, 0 until one is seen
	lastEnd int64         // the latest window end seen, in the server's Unix seconds

	// corrected is the total by which observations have moved the level
	// down; epoch changes when the level is no longer comparable with
	// earlier snapshots (a new limit, a new window).
	corrected float64
	epoch     uint32
}

// snapshot is a bucket's level counting the requests sent, just after one
// was sent: the server's remaining count for that request should match it,
// whatever order the waiters woke in.
type snapshot struct {
	level     float64
	total     float64 // the bucket's total once this request was counted in it
	corrected float64
	epoch     uint32
	ok        bool
}

// defaultPeriod is the period over which a token bucket's limit is taken
// to refill until an observation shows its rate: the limits of OpenAI and
// Anthropic, the buckets read here, are per minute.
const defaultPeriod = time.Minute

// advance refills the bucket up to now.
func (b *bucket) advance(now int64) {
	if now <= b.at {
		return
	}
	switch b.kind {
	case kindBucket:
		refill := b.rate * float64(now-b.at) / 1e9
		b.level = min(b.limit, b.level+refill)
		b.sent = min(b.limit, b.sent+refill)
	case kindWindow:
		if now >= b.resetAt && b.window > 0 {
			n := (now-b.resetAt)/int64(b.window) + 1
			// Unused quota does not carry over; reservations made for
			// later windows do, each window's quota repaying them.
			if b.guessed {
				// The window's length is not known, nor so where the
				// next one ends: the window stays until a response
				// says (see learnWindow).
				break
			}
			b.roll()
			b.epoch += uint32(n - 1)
			b.resetAt += n * int64(b.window)
			// Until a response dates the new window's end, its length is
			// a guess unless the format states it or two ends showed it.
			b.guessed = !b.stated && b.gap == 0
		}
	}
	b.at = now
}

// take reserves n units at now, and returns how long the caller must wait
// for them and, for a fixed window, the epoch of the window they belong
// to: the caller checks it when it wakes (see due), as the window's end
// may have moved meanwhile.
func (b *bucket) take(n float64, now int64) (time.Duration, uint32) {
	if b.kind == kindNone {
		return 0, 0
	}
	b.advance(now)
	n = min(n, b.limit) // a request larger than the limit waits for a full bucket, not forever
	b.level -= n
	b.queued += n
	if b.kind == kindBucket {
		if b.level >= 0 {
			return 0, b.epoch
		}
		return durationOf(-b.level / b.rate), b.epoch
	}
	// A window's place is by the queue: what is reserved ahead, this
	// request included, beyond what is left of this window. What is left
	// is never below zero: requests sent past it (their answers may have
	// shown a shortfall only after they went) are refused, and spend none
	// of a later window.
	over := b.queued - max(b.sent, 0)
	if over <= 0 {
		return 0, b.epoch
	}
	k := math.Ceil(over / b.limit) // windows to wait
	wait := time.Duration(b.resetAt-now) + time.Duration(k-1)*b.window
	if wait <= 0 { // a guessed end has passed, and no response has dated the window yet
		wait = guessedWait(b.window)
	}
	return wait, b.epoch + uint32(k)
}

// guessedWait is how long a caller waits, and waits again, for a window
// whose guessed end has passed before any response dated it.
func guessedWait(window time.Duration) time.Duration { return max(window/8, 10*time.Millisecond) }

// due returns how much longer a caller whose units belong to the window of
// epoch e must wait at now: zero once that window has begun. The server
// may have shown since the caller queued that a window ends later than
// the bucket thought; the caller waits for the window, not for the time
// it was first told.
func (b *bucket) due(e uint32, now int64) time.Duration {
	if b.kind != kindWindow {
		return 0
	}
	b.advance(now)
	ahead := int32(e - b.epoch) // windows still to begin; wraps safely
	if ahead <= 0 {
		return 0
	}
	wait := time.Duration(b.resetAt-now) + time.Duration(ahead-1)*b.window
	if wait <= 0 { // a guessed end has passed, and no response has dated the window yet
		wait = guessedWait(b.window)
	}
	return wait
}

// send counts n units reserved by take as sent at now, and returns the
// snapshot to compare the server's answer with.
func (b *bucket) send(n float64, now int64) snapshot {
	if b.kind == kindNone {
		return snapshot{}
	}
	b.advance(now)
	n = min(n, b.limit)
	b.sent -= n
	b.total += n
	b.queued = max(b.queued-n, 0)
	return snapshot{level: b.sent, total: b.total, corrected: b.corrected, epoch: b.epoch, ok: true}
}

// untake returns n units reserved by a caller that gave up its wait.
func (b *bucket) untake(n float64) {
	if b.kind != kindNone {
		n = min(n, b.limit)
		b.level = min(b.level+n, b.limit)
		b.queued = max(b.queued-n, 0)
	}
}

// learn moves the bucket to what the server reported at now for a request
// whose reservation took snap: down when the server has less than the
// bucket counted, never up past it.
//
// The server may count requests sent together in another order than they
// were sent: a response's remaining count can be lower than its
// snapshot's by the requests sent after it, and that is no shortfall.
// Only what the server lacks beyond every request sent since is another
// client's use (for a fixed window, that is the level counting every
// request sent; a token bucket's refills since are not in the server's
// count). A request sent before the bucket was known has no snapshot: it
// is compared with the level the bucket began with, since the server
// counted it around the request that taught the bucket, and requests sent
// since then came after it.
func (b *bucket) learn(o *limitObs, snap snapshot, now int64) {
	if o.kind == kindNone {
		return
	}
	b.advance(now)
	if b.kind != o.kind || b.limit != o.limit {
		b.reset(o, now)
		return
	}
	if b.kind == kindBucket {
		b.learnRate(o, now)
	} else if !b.learnWindow(o, now) {
		return
	}
	switch {
	case snap.ok && snap.epoch == b.epoch:
		b.correct(snap.level - (b.total - snap.total) - (b.corrected - snap.corrected) - o.remaining)
	case !snap.ok && b.origin.epoch == b.epoch:
		b.correct(b.origin.level - (b.corrected - b.origin.corrected) - o.remaining)
	default:
		// A note from another window: the level counting every request
		// sent is the least the server can have left.
		b.correct(b.sent - o.remaining)
	}
}

// correct moves the level down by a shortfall d, when there is one.
func (b *bucket) correct(d float64) {
	if d > 0 {
		b.level -= d
		b.sent -= d
		b.corrected += d
	}
}

// learnWindow takes the window's end and length from an observation at
// now, and reports whether its remaining count is about the bucket's
// current window: an end well before the bucket's is a window that has
// ended, and one well after it is the server's next window, which the
// bucket then begins at once (its own end, read from whole seconds, may
// be up to a second late).
//
// Within a window, the end is the earliest that its responses allow.
// Each reset is read to the whole second: servers round a time to live up
// or to the nearest second, and some truncate the Unix time of the end, so
// now plus reset plus a second of rounding is never before the window's
// true end; the least of these is the closest. The end the bucket took
// from the last window's end and length gives way to the first response
// that dates the window: the server may have begun it later (limiters that
// start a window at its first request).
func (b *bucket) learnWindow(o *limitObs, now int64) bool {
	if o.reset <= o.slack {
		return false // at the boundary: which window is unclear
	}
	b.learnLength(o)
	end := now + int64(o.reset+o.slack)
	tol := max(int64(b.window)/2, int64(o.slack))
	switch {
	case b.guessed:
		// The first end of a window whose length was not known: this
		// is it (a response about the last window would be at its
		// boundary).
		b.resetAt, b.guessed, b.dated = end, false, true
	case end > b.resetAt+tol:
		b.roll()
		b.resetAt, b.dated = end, true
	case end < b.resetAt-tol:
		return false
	case !b.dated || end < b.resetAt:
		b.resetAt, b.dated = end, true
	}
	return true
}

// roll begins the next window now: its quota goes first to what was
// reserved and not yet sent. Nothing else carries over: neither unused
// quota nor a shortfall the last window's responses showed.
func (b *bucket) roll() {
	b.level = b.limit - b.queued
	b.sent = b.limit
	b.epoch++
	b.dated = false
}

// reset starts the bucket afresh from an observation, keeping the debt of
// the reservations already queued so that later callers stay behind them.
func (b *bucket) reset(o *limitObs, now int64) {
	queued := b.queued
	if b.kind == kindNone {
		queued = 0
	}
	*b = bucket{kind: o.kind, limit: o.limit, level: o.remaining - queued, sent: o.remaining, total: b.total,
		queued: queued, at: now, epoch: b.epoch + 1}
	b.origin = snapshot{level: o.remaining, total: b.total, epoch: b.epoch, ok: true}
	switch o.kind {
	case kindBucket:
		b.rate = o.limit / defaultPeriod.Seconds()
		b.learnRate(o, now)
	case kindWindow:
		b.resetAt, b.dated = now+int64(o.reset+o.slack), true
		b.learnLength(o)
	}
}

// learnLength refines the window's length from an observation.
func (b *bucket) learnLength(o *limitObs) {
	if o.window > 0 {
		b.window, b.stated = o.window, true
	}
	if b.stated {
		return
	}
	b.longest = max(b.longest, o.reset+o.slack, time.Second)
	if o.end != 0 && b.lastEnd != 0 && o.end > b.lastEnd {
		g := time.Duration(o.end-b.lastEnd) * time.Second
		if g > 2*o.slack && g+2*o.slack >= b.longest && g <= wire.MaxReset && (b.gap == 0 || g < b.gap) {
			b.gap = g
		}
	}
	b.lastEnd = max(b.lastEnd, o.end)
	b.window = max(b.longest, b.gap)
}

// learnRate takes the refill rate from an observation: (limit -
// remaining) / reset, the reset being the time until the bucket is full
// again. Servers state their limits per minute,
// second, hour or day, so when the limit per one of those (in that order)
// fits the observation within 5% and the reset's rounding, it is taken to
// be the rate exactly. Otherwise the estimate from the longest reset wins
// for a minute, since rounding hurts short resets most, and a reset read
// to the second counts as a second longer, erring towards a slower rate.
func (b *bucket) learnRate(o *limitObs, now int64) {
	var r float64
	var basis time.Duration
	switch {
	case o.remaining < o.limit && o.reset > 0:
		used := o.limit - o.remaining
		lo := used / (o.reset + o.slack).Seconds() / 1.05
		hi := math.Inf(1)
		if o.reset > o.slack {
			hi = used / (o.reset - o.slack).Seconds() * 1.05
		}
		for _, p := range [...]float64{60, 1, 3600, 86400} {
			if fit := o.limit / p; fit >= lo && fit <= hi {
				r, basis = fit, wire.MaxReset
				break
			}
		}
		if basis == 0 {
			basis = o.reset + o.slack
			r = used / basis.Seconds()
		}
	default:
		return
	}
	if basis >= b.rateBasis || now-b.rateAt > int64(time.Minute) {
		b.rate, b.rateBasis, b.rateAt = r, basis, now
	}
}

// durationOf converts seconds to a Duration, saturating.
func durationOf(secs float64) time.Duration {
	ns := secs * 1e9
	if ns >= float64(wire.MaxDuration) || math.IsNaN(ns) {
		return wire.MaxDuration
	}
	return time.Duration(ns)
}
