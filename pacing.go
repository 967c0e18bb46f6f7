package retry

import (
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry/internal/wire"
)

// Pacer spaces the attempts of the callers that share it, so that a
// server's limits hold: Transport.Pacer takes one. Package
// github.com/retrykit/retry/pace has the Pacer that learns the limits from
// rate-limit headers; any other (a fixed rate, a concurrency limit) plugs in
// the same way.
//
// The Transport owns time. Before each attempt it calls Reserve, waits as
// long as it says by the Policy's Clock and Sleep, then asks the
// Reservation whether it may go (Ready), until it may. A wait counts
// against the call's Deadline: one that cannot end in time ends the call at
// once, with ReasonDeadline, and a cancelled one with the context's error;
// either way the Reservation is cancelled. After the attempt, the Transport
// reports what it got (Done). A Pacer must be safe for concurrent use.
type Pacer interface {
	// Reserve books the attempt of req that is about to begin (attempt
	// counts from 1) and returns its Reservation and how long it must
	// wait before it is sent; zero or less means at once. clock dates it
	// (nil: the real clock); room is how long the call has left, which a
	// wait for anything outside the process must not outlast.
	Reserve(req *http.Request, attempt int, clock clockwork.Clock, room time.Duration) (Reservation, time.Duration)
}

// Reservation is one attempt's place with a [Pacer]. The Transport calls
// Ready after each wait, then exactly one of Cancel and Done.
type Reservation interface {
	// Ready is called when a wait has ended, and returns how much longer
	// to wait; zero or less sends the attempt. last says that the
	// Transport will not wait again: the attempt goes whatever Ready says.
	Ready(clock clockwork.Clock, room time.Duration, last bool) time.Duration

	// Cancel gives the place back: no attempt will use it.
	Cancel()

	// Done reports the response to req's attempt, or err when it got
	// none. hold, when positive, is a Retry-After, jittered, that asks
	// every caller to wait (see holdsAll): the call sleeps exactly that
	// long before its next attempt. room is as for Reserve.
	//
	// Done comes at the response headers; for an event stream that
	// Transport.Stream holds back, at its commit point instead, and err is
	// then the *StreamError of an error event met before any output, with
	// resp the response that carried it.
	Done(req *http.Request, resp *http.Response, err error, clock clockwork.Clock, hold, room time.Duration)
}

// Queued is implemented by a Reservation whose attempt may have to wait its
// turn behind others rather than for a time: a place under a limit on the
// requests in flight. Each time the Reservation says to wait no longer,
// the Transport calls Turn. A nil channel sends the attempt; any other
// makes it wait until the channel is closed, then ask Ready again. est is
// how long the wait is expected to last: when it is not shorter than room,
// the call ends at once with ReasonDeadline, as it does when room runs
// out before the turn comes; a cancelled wait ends it with the context's
// error. Either way the Reservation is cancelled. The wait is not a Sleep:
// Policy.Sleep is not called for it.
type Queued interface {
	// Turn returns nil when the attempt may go now, or the channel closed
	// when its turn comes and how long that is expected to take; clock
	// and room are as for Pacer.Reserve.
	Turn(clock clockwork.Clock, room time.Duration) (turn <-chan struct{}, est time.Duration)
}

// begin waits for the Transport's Pacer, if any, then starts the next
// attempt: the wait comes before the attempt's timeout starts, and counts
// against the call's Deadline only.
func (c *call) begin() (time.Duration, error) {
	if c.t.Pacer == nil {
		return c.l.begin()
	}
	if err := c.pace(); err != nil {
		return 0, err
	}
	timeout, err := c.l.begin()
	if err != nil && c.pr != nil {
		c.pr.Cancel() // no attempt will use the reservation
		c.pr = nil
	}
	return timeout, err
}

// pace reserves the next attempt's place with the Pacer and waits for it,
// asking again after each wait: what the Pacer learned meanwhile may say to
// wait longer. After maxPaceWaits timed waits the attempt goes, so that a
// Sleep that does not wait cannot make this spin; a wait for a turn (see
// Queued) ends only when the turn comes.
func (c *call) pace() error {
	l := &c.l
	if l.ctx.Err() != nil {
		return nil // begin reports it
	}
	l.waited = true // a Pacer may take time: the attempt reads the clock
	room := l.room()
	r, wait := c.t.Pacer.Reserve(c.req, l.attempt+1, l.p.Clock, room)
	q, _ := r.(Queued)
	for waits := 1; ; waits++ {
		if wait <= 0 {
			if q == nil {
				break
			}
			turn, est := q.Turn(l.p.Clock, room)
			if turn == nil {
				break
			}
			if est >= room {
				r.Cancel()
				return l.giveUp(ReasonDeadline)
			}
			if err := l.await(turn, room); err != nil {
				r.Cancel()
				return err
			}
		} else {
			if wait >= room {
				r.Cancel()
				return l.giveUp(ReasonDeadline)
			}
			if err := l.pause(wait, true); err != nil {
				r.Cancel()
				return err
			}
		}
		room = l.room()
		wait = r.Ready(l.p.Clock, room, waits >= maxPaceWaits)
	}
	c.pr = r
	return nil
}

// maxPaceWaits bounds the waits of one attempt for the Pacer.
const maxPaceWaits = 8

// learn hands the outcome of an attempt to the Pacer: the response, or the
// error of an attempt that got none. A Retry-After that holds every caller
// is jittered here, once: the sleep of this call before its next attempt
// is the same hold (see loop.jitter), so the caller refused never wakes
// before the others do.
func (c *call) learn(resp *http.Response, err error) {
	r := c.pr
	if r == nil {
		return
	}
	c.pr = nil
	l := &c.l
	l.held, l.drawn = 0, 0
	if resp == nil {
		r.Done(c.req, nil, err, l.p.Clock, 0, 0)
		return
	}
	if err != nil { // an event stream's error before its output
		r.Done(c.req, resp, err, l.p.Clock, 0, l.room())
		return
	}
	if holdsAll(resp.StatusCode) && hasRetryAfter(resp.Header) {
		if d, ok := ParseRetryAfter(resp.Header, l.p.now()); ok && d > 0 && d <= wire.MaxReset {
			l.held, l.drawn = d, l.p.jitterHint(d)
		}
	}
	r.Done(c.req, resp, nil, l.p.Clock, l.drawn, l.room())
}

// holdsAll reports a status whose Retry-After asks every caller of the
// server to wait, not only the one refused: a rate limit (429, and
// GitHub's secondary limit, a 403 with Retry-After, where going on risks
// the integration) or an overloaded server (503, and Anthropic's 529).
func holdsAll(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusForbidden, wire.StatusOverloaded:
		return true
	}
	return false
}
