package retry

import (
	"fmt"
	"net/http"
	"time"
)

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
	if err != nil {
		c.t.Pacer.cancel(&c.pt) // no attempt will use the reservation
	}
	return timeout, err
}

// pace reserves the next attempt's place with the Pacer and waits for it.
// A wait that cannot end before the Deadline or the context's deadline
// fails the call at once, as a sleep that cannot does; a cancelled wait
// returns at once. Either way the reservation is given back. When a wait
// ends, the Pacer is asked again: what it learned meanwhile may say to
// wait longer.
func (c *call) pace() error {
	l, p := &c.l, c.t.Pacer
	if l.ctx.Err() != nil {
		return nil // begin reports it
	}
	wait, hinted := p.reserve(&c.pt, c.req, l.p.Clock, c.storeRoom())
	for waits := 1; wait > 0; waits++ {
		if wait >= l.room() {
			p.cancel(&c.pt)
			return l.giveUp(ReasonDeadline)
		}
		if p.OnWait != nil {
			p.OnWait(PaceEvent{Attempt: l.attempt + 1, Delay: wait, Host: requestHost(c.req), RetryAfter: hinted})
		}
		took, err := l.wait(wait)
		l.paced += took
		switch {
		case l.ctx.Err() != nil:
			p.cancel(&c.pt)
			return l.canceled(nil)
		case err != nil:
			p.cancel(&c.pt)
			return fmt.Errorf("retry: Policy.Sleep failed waiting for the Pacer after %d attempts: %w", l.attempt, err)
		}
		// A Sleep that does not wait would make this loop spin: after
		// a few waits, the request goes.
		wait, hinted = p.ready(&c.pt, l.p.Clock, waits >= maxPaceWaits)
	}
	return nil
}

// maxPaceWaits bounds the waits of one attempt for the Pacer.
const maxPaceWaits = 8

// learn hands the outcome of an attempt to the Pacer: the response's
// headers, or, for an attempt that failed without one, the end of its
// in-flight slot. A Retry-After that holds the key is jittered here, once:
// the sleep of this call before its next attempt is the same hold (see
// loop.jitter), so the caller refused never wakes before the key does.
func (c *call) learn(resp *http.Response, err error) {
	p := c.t.Pacer
	if p == nil {
		return
	}
	if err != nil || resp == nil {
		p.release(&c.pt)
		return
	}
	l := &c.l
	l.held, l.drawn = 0, 0
	if holdsKey(resp.StatusCode) && hasRetryAfter(resp.Header) {
		if d, ok := ParseRetryAfter(resp.Header, l.p.now()); ok && d > 0 && d <= maxPacerReset {
			l.held, l.drawn = d, l.p.jitterHint(d)
		}
	}
	p.observe(&c.pt, c.req, resp, l.p.Clock, l.drawn, c.storeRoom())
}

// storeRoom is how long a call to the Pacer's store may take: the time left
// to the call. Without a store it is zero and the clock is not read, so
// that a Pacer in memory costs no reading per attempt and per response.
// A store call takes real time, so the next attempt reads the clock again.
func (c *call) storeRoom() time.Duration {
	if c.t.Pacer.Store == nil {
		return 0
	}
	c.l.waited = true
	return c.l.room()
}

func requestHost(req *http.Request) string {
	if req.URL != nil && req.URL.Host != "" {
		return req.URL.Host
	}
	return req.Host
}
