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
// returns at once. Either way the reservation is given back.
func (c *call) pace() error {
	l, p := &c.l, c.t.Pacer
	if l.ctx.Err() != nil {
		return nil // begin reports it
	}
	wait, hinted := p.reserve(&c.pt, c.req, l.p.Clock, c.storeRoom())
	if wait <= 0 {
		return nil
	}
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
	p.send(&c.pt, l.p.Clock)
	return nil
}

// learn hands the outcome of an attempt to the Pacer: the response's
// headers, or, for an attempt that failed without one, the end of its
// in-flight slot.
func (c *call) learn(resp *http.Response, err error) {
	p := c.t.Pacer
	if p == nil {
		return
	}
	if err != nil || resp == nil {
		p.release(&c.pt)
		return
	}
	p.observe(&c.pt, c.req, resp, &c.l.p, c.storeRoom())
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
