package retry

import (
	"math"
	"time"
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
	kind  limitKind // kindNone: nothing learned; then the dimension is not paced
	limit float64   // the bucket's size, or the window's quota
	level float64   // at time at; negative: reserved ahead of refills
	sent  float64   // at time at: the level counting only the requests sent, as the server counts
	at    int64     // Unix nanoseconds of the last advance

	// kindBucket: the refill rate in units per second, and the reset it
	// was estimated from (a longer one is less hurt by rounding) and when.
	rate      float64
	rateBasis time.Duration
	rateAt    int64

	// kindWindow: when the current window ends, and how long one lasts.
	// Servers of fixed windows do not say: the length is the least gap
	// between two windows' ends as the server dates them (exact), or until
	// two are seen, the longest reset seen plus its rounding (erring late).
	resetAt     int64
	window      time.Duration
	windowExact bool
	lastEnd     int64 // the latest window end seen, in the server's Unix seconds

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
			for i := int64(0); i < n; i++ {
				b.level = min(b.level, 0) + b.limit
				if b.level == b.limit {
					break
				}
			}
			b.sent = b.limit
			b.resetAt += n * int64(b.window)
			b.epoch += uint32(n)
		}
	}
	b.at = now
}

// take reserves n units at now, and returns how long the caller must wait
// for them.
func (b *bucket) take(n float64, now int64) time.Duration {
	if b.kind == kindNone {
		return 0
	}
	b.advance(now)
	n = min(n, b.limit) // a request larger than the limit waits for a full bucket, not forever
	b.level -= n
	if b.level >= 0 {
		return 0
	}
	switch b.kind {
	case kindBucket:
		return durationOf(-b.level / b.rate)
	default:
		k := math.Ceil(-b.level / b.limit) // windows to wait
		return time.Duration(b.resetAt-now) + time.Duration(k-1)*b.window
	}
}

// send counts n units reserved by take as sent at now, and returns the
// snapshot to compare the server's answer with.
func (b *bucket) send(n float64, now int64) snapshot {
	if b.kind == kindNone {
		return snapshot{}
	}
	b.advance(now)
	b.sent -= min(n, b.limit)
	return snapshot{level: b.sent, corrected: b.corrected, epoch: b.epoch, ok: true}
}

// untake returns n units reserved by a caller that gave up its wait.
func (b *bucket) untake(n float64) {
	if b.kind != kindNone {
		b.level = min(b.level+min(n, b.limit), b.limit)
	}
}

// learn moves the bucket to what the server reported at now for a request
// whose reservation took snap: down when the server has less than the
// bucket counted, never up past it.
func (b *bucket) learn(o *limitObs, snap snapshot, now int64) {
	if o.kind == kindNone {
		return
	}
	b.advance(now)
	if b.kind != o.kind || b.limit != o.limit {
		b.reset(o, now)
		return
	}
	switch b.kind {
	case kindBucket:
		b.learnRate(o, now)
	case kindWindow:
		if snap.ok && snap.epoch != b.epoch {
			return // about a window that has ended
		}
		end := now + int64(o.reset)
		if o.reset <= o.slack {
			return // at the boundary: which window is unclear
		}
		b.learnWindow(o)
		if d := end - b.resetAt; d > int64(o.slack) || d < -int64(o.slack) {
			b.resetAt = end
		}
	}
	var d float64
	if snap.ok && snap.epoch == b.epoch {
		d = snap.level - o.remaining - (b.corrected - snap.corrected)
	} else {
		d = b.sent - o.remaining
	}
	if d > 0 {
		b.level -= d
		b.sent -= d
		b.corrected += d
	}
}

// reset starts the bucket afresh from an observation, keeping the debt of
// the reservations already queued so that later callers stay behind them.
func (b *bucket) reset(o *limitObs, now int64) {
	debt := min(b.level, 0)
	if b.kind == kindNone {
		debt = 0
	}
	*b = bucket{kind: o.kind, limit: o.limit, level: o.remaining + debt, sent: o.remaining, at: now, epoch: b.epoch + 1}
	switch o.kind {
	case kindBucket:
		b.rate = o.limit / defaultPeriod.Seconds()
		b.learnRate(o, now)
	case kindWindow:
		b.resetAt = now + int64(o.reset)
		b.window = max(o.reset+o.slack, time.Second)
		b.lastEnd = o.end
	}
}

// learnWindow refines the window's length from an observation.
func (b *bucket) learnWindow(o *limitObs) {
	if o.end != 0 && b.lastEnd != 0 && o.end > b.lastEnd {
		gap := time.Duration(o.end-b.lastEnd) * time.Second
		if gap <= maxPacerReset && (!b.windowExact || gap < b.window) {
			b.window, b.windowExact = gap, true
		}
	}
	b.lastEnd = max(b.lastEnd, o.end)
	if !b.windowExact {
		b.window = max(b.window, o.reset+o.slack)
	}
}

// learnRate takes the refill rate from an observation: the format's own
// (IETF q/w), else (limit - remaining) / reset, the reset being the time
// until the bucket is full again. Servers state their limits per minute,
// second, hour or day, so when the limit per one of those (in that order)
// fits the observation within 5% and the reset's rounding, it is taken to
// be the rate exactly. Otherwise the estimate from the longest reset wins
// for a minute, since rounding hurts short resets most, and a reset read
// to the second counts as a second longer, erring towards a slower rate.
func (b *bucket) learnRate(o *limitObs, now int64) {
	var r float64
	var basis time.Duration
	switch {
	case o.rate > 0:
		r, basis = o.rate, maxPacerReset
	case o.remaining < o.limit && o.reset > 0:
		used := o.limit - o.remaining
		lo := used / (o.reset + o.slack).Seconds() / 1.05
		hi := math.Inf(1)
		if o.reset > o.slack {
			hi = used / (o.reset - o.slack).Seconds() * 1.05
		}
		for _, p := range [...]float64{60, 1, 3600, 86400} {
			if fit := o.limit / p; fit >= lo && fit <= hi {
				r, basis = fit, maxPacerReset
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
	if ns >= float64(maxDuration) || math.IsNaN(ns) {
		return maxDuration
	}
	return time.Duration(ns)
}
