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
	at    int64     // Unix nanoseconds of the last advance

	// kindBucket: the refill rate in units per second, and the reset it
	// was estimated from (a longer one is less hurt by rounding) and when.
	rate      float64
	rateBasis time.Duration
	rateAt    int64

	// kindWindow: when the current window ends, and how long one lasts
	// (the longest reset seen; servers of fixed windows do not say).
	resetAt int64
	window  time.Duration

	// corrected is the total by which observations have moved the level
	// down; epoch changes when the level is no longer comparable with
	// earlier snapshots (a new limit, a new window).
	corrected float64
	epoch     uint32
}

// snapshot is a bucket's level as it will be when a reserved request is
// sent, counting only the reservations ahead of it: the server's remaining
// count for that request should match it.
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
		b.level = min(b.limit, b.level+b.rate*float64(now-b.at)/1e9)
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
			b.resetAt += n * int64(b.window)
			b.epoch += uint32(n)
		}
	}
	b.at = now
}

// take reserves n units at now, and returns how long the caller must wait
// for them and the snapshot to compare the server's answer with.
func (b *bucket) take(n float64, now int64) (time.Duration, snapshot) {
	if b.kind == kindNone {
		return 0, snapshot{}
	}
	b.advance(now)
	n = min(n, b.limit) // a request larger than the limit waits for a full bucket, not forever
	b.level -= n
	snap := snapshot{level: b.level, corrected: b.corrected, epoch: b.epoch, ok: true}
	if b.level >= 0 {
		return 0, snap
	}
	switch b.kind {
	case kindBucket:
		secs := -b.level / b.rate
		snap.level = 0
		return durationOf(secs), snap
	default:
		k := math.Ceil(-b.level / b.limit) // windows to wait
		snap.level += k * b.limit
		snap.epoch += uint32(k)
		return time.Duration(b.resetAt-now) + time.Duration(k-1)*b.window, snap
	}
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
		b.window = max(b.window, o.reset+o.slack)
		if d := end - b.resetAt; d > int64(o.slack) || d < -int64(o.slack) {
			b.resetAt = end
		}
	}
	var d float64
	if snap.ok && snap.epoch == b.epoch {
		d = snap.level - o.remaining - (b.corrected - snap.corrected)
	} else {
		d = b.level - o.remaining
	}
	if d > 0 {
		b.level -= d
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
	*b = bucket{kind: o.kind, limit: o.limit, level: o.remaining + debt, at: now, epoch: b.epoch + 1}
	switch o.kind {
	case kindBucket:
		b.rate = o.limit / defaultPeriod.Seconds()
		b.learnRate(o, now)
	case kindWindow:
		b.resetAt = now + int64(o.reset)
		b.window = max(o.reset+o.slack, time.Second)
	}
}

// learnRate takes the refill rate from an observation: the format's own
// (IETF q/w), else (limit - remaining) / reset, the reset being the time
// until the bucket is full again. Servers state their limits per second,
// minute, hour or day, so an estimate within 5% (plus the reset's rounding,
// when that is 5% or less) of one of those is taken to be exactly that. Otherwise the estimate from
// the longest reset wins for a minute, since rounding hurts short resets
// most, and a reset read to the second counts as a second longer, erring
// towards a slower rate.
func (b *bucket) learnRate(o *limitObs, now int64) {
	var r float64
	var basis time.Duration
	switch {
	case o.rate > 0:
		r, basis = o.rate, maxPacerReset
	case o.remaining < o.limit && o.reset > 0:
		period := o.reset.Seconds() * o.limit / (o.limit - o.remaining)
		rounding := o.slack.Seconds() / o.reset.Seconds()
		tol := 0.05 + rounding
		for _, p := range [...]float64{1, 60, 3600, 86400} {
			if rounding <= 0.05 && period >= p*(1-tol) && period <= p*(1+tol) {
				r, basis = o.limit/p, maxPacerReset
				break
			}
		}
		if basis == 0 {
			basis = o.reset + o.slack
			r = (o.limit - o.remaining) / basis.Seconds()
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
