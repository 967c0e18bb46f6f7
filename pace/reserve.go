package pace

import (
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/wire"
)

var (
	_ retry.Pacer  = (*Pacer)(nil)
	_ retry.Queued = (*reservation)(nil)
)

// Reserve books the attempt of req that is about to begin and returns its
// place and how long it must wait first: its turn in the buckets of req's
// key, or a Retry-After that holds the key; and, when the key has a
// concurrency limit, a slot under it (see reservation.Turn). It is the method by which a
// [retry.Transport] uses the Pacer; OnWait is called for each wait that
// can end within room.
func (p *Pacer) Reserve(req *http.Request, attempt int, clock clockwork.Clock, room time.Duration) (retry.Reservation, time.Duration) {
	if p == nil { // a nil *Pacer in a Transport's Pacer, which is no nil interface
		return none{}, 0
	}
	store := p.storeOn() && room > 0
	var k *paceKey
	if !store {
		if k = p.lookup(req); k == nil {
			return (*unknown)(p), 0 // nothing to reserve: the common case costs no state
		}
	}
	r := reservations.Get().(*reservation)
	r.p, r.req, r.attempt, r.clock = p, req, attempt, clock // req for OnWait's host
	wait, hinted := p.reserveKey(&r.t, req, k, store, clock, room)
	r.onWait(wait, hinted, room)
	return r, wait
}

// unknown is the Reservation of a request whose key the Pacer knows
// nothing of, without a store: there is nothing to give back, and its
// response, the first of the key perhaps, is learned from as any other.
type unknown Pacer

func (u *unknown) Ready(clockwork.Clock, time.Duration, bool) time.Duration { return 0 }
func (u *unknown) Cancel()                                                  {}

func (u *unknown) Done(req *http.Request, resp *http.Response, err error, clock clockwork.Clock, hold, room time.Duration) {
	if resp != nil {
		var t paceTicket
		(*Pacer)(u).observe(&t, req, resp, err, clock, hold, room)
	}
}

// reservation is one attempt's place with a Pacer, the retry.Reservation
// that Reserve returns. It goes back to the pool when the attempt is done
// or cancelled.
type reservation struct {
	p       *Pacer
	req     *http.Request
	attempt int
	clock   clockwork.Clock // Reserve's, to date a Cancel
	t       paceTicket
}

var reservations = sync.Pool{New: func() any { return new(reservation) }}

// Ready is called when a wait has ended; see retry.Reservation.
func (r *reservation) Ready(clock clockwork.Clock, room time.Duration, last bool) time.Duration {
	wait, hinted := r.p.ready(&r.t, clock, last)
	r.onWait(wait, hinted, room)
	return wait
}

// Turn waits for a slot under the key's concurrency limit, when it has one
// and none is free; see retry.Queued. OnWait is called for the wait, its
// Delay an estimate from the time slots have been held lately.
func (r *reservation) Turn(clock clockwork.Clock, room time.Duration) (<-chan struct{}, time.Duration) {
	turn, est := r.p.turn(&r.t, clock)
	if turn == nil {
		return nil, 0
	}
	if f := r.p.OnWait; f != nil && est > 0 && est < room {
		f(Event{Attempt: r.attempt, Delay: est, Host: wire.Host(r.req), Slot: true})
	}
	return turn, est
}

// Cancel gives the place back; see retry.Reservation.
func (r *reservation) Cancel() {
	r.p.cancel(&r.t, r.clock)
	r.free()
}

// Done learns from the attempt's response; see retry.Reservation.
func (r *reservation) Done(req *http.Request, resp *http.Response, err error, clock clockwork.Clock, hold, room time.Duration) {
	if resp == nil {
		r.p.release(&r.t, clock)
	} else {
		r.p.observe(&r.t, req, resp, err, clock, hold, room)
	}
	r.free()
}

func (r *reservation) free() {
	*r = reservation{}
	reservations.Put(r)
}

// onWait reports a wait of the attempt to OnWait, unless it cannot end
// within room: the Transport then ends the call instead of waiting.
func (r *reservation) onWait(wait time.Duration, hinted bool, room time.Duration) {
	if f := r.p.OnWait; f != nil && wait > 0 && wait < room {
		f(Event{Attempt: r.attempt, Delay: wait, Host: wire.Host(r.req), RetryAfter: hinted})
	}
}

// none is the Reservation of a nil *Pacer: it paces nothing and learns
// nothing.
type none struct{}

func (none) Ready(clockwork.Clock, time.Duration, bool) time.Duration { return 0 }
func (none) Cancel()                                                  {}
func (none) Done(*http.Request, *http.Response, error, clockwork.Clock, time.Duration, time.Duration) {
}
