package pace

import (
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/wire"
)

var _ retry.Pacer = (*Pacer)(nil)

// Reserve books the attempt of req that is about to begin and returns its
// place and how long it must wait first: its turn in the buckets of req's
// key, or a Retry-After that holds the key. It is the method by which a
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
	r.p, r.req, r.attempt = p, req, attempt // req for OnWait's host
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
	if err == nil && resp != nil {
		var t paceTicket
		(*Pacer)(u).observe(&t, req, resp, clock, hold, room)
	}
}

// reservation is one attempt's place with a Pacer, the retry.Reservation
// that Reserve returns. It goes back to the pool when the attempt is done
// or cancelled.
type reservation struct {
	p       *Pacer
	req     *http.Request
	attempt int
	t       paceTicket
}

var reservations = sync.Pool{New: func() any { return new(reservation) }}

// Ready is called when a wait has ended; see retry.Reservation.
func (r *reservation) Ready(clock clockwork.Clock, room time.Duration, last bool) time.Duration {
	wait, hinted := r.p.ready(&r.t, clock, last)
	r.onWait(wait, hinted, room)
	return wait
}

// Cancel gives the place back; see retry.Reservation.
func (r *reservation) Cancel() {
	r.p.cancel(&r.t)
	r.free()
}

// Done learns from the attempt's response; see retry.Reservation.
func (r *reservation) Done(req *http.Request, resp *http.Response, err error, clock clockwork.Clock, hold, room time.Duration) {
	if err != nil || resp == nil {
		r.p.release(&r.t)
	} else {
		r.p.observe(&r.t, req, resp, clock, hold, room)
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
