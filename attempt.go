package retry

import (
	"context"
	"io"
	"sync"
	"time"
)

// attemptCtx is the context of one Transport attempt: done when its timeout
// passes while still in force, when the caller's context (parent) is done,
// or when the attempt is released.
//
// It is not context.WithTimeout for one reason: the attempt timeout ends
// when the response headers arrive, but the body is then read under the
// same context, so the timeout must be switched off without ending the
// context (stopTimeout). It keeps the rules of the standard contexts: Err
// is nil until Done is closed; its own timeout gives DeadlineExceeded, its
// parent's end the parent's error and cause; the first end is final. Its
// AfterFunc method spares a goroutine per context derived from it (net/http
// derives one for every request).
//
// Each attempt owns its timer, made in the goroutine that starts it: under
// testing/synctest the timer belongs to the caller's bubble, and no timer
// ever serves two attempts.
type attemptCtx struct {
	parent   context.Context
	n        int       // which attempt of its call, counting from 1
	deadline time.Time // when the attempt's own timeout passes

	mu         sync.Mutex           // protects the fields below
	why        int                  // why the attempt ended: one of the end values
	done       chan struct{}        // made by the first Done; closed when the attempt ends
	stopped    bool                 // stopTimeout switched the timeout off
	timer      *time.Timer          // ends the attempt at deadline; nil once stopped
	stopParent func() bool          // ends the watch on parent; nil if none
	first      func()               // the first AfterFunc registration
	more       map[*func()]struct{} // later registrations, each stoppable
	closer     io.Closer            // closed if the attempt ends while set (closeOnEnd)
}

// Why an attempt ended.
const (
	running     = iota
	timedOut    // its own timeout passed: context.DeadlineExceeded
	idled       // its body waited too long for a byte: context.DeadlineExceeded
	released    // its result is no longer needed: context.Canceled
	parentEnded // the parent is done: the parent's error
)

// start begins attempt n under parent at began (zero: now), with at most
// timeout to get its response headers. c must not be in use yet.
func (c *attemptCtx) start(parent context.Context, n int, began time.Time, timeout time.Duration) {
	c.parent, c.n = parent, n
	if began.IsZero() {
		began = time.Now()
	}
	c.deadline = began.Add(timeout)
	c.mu.Lock() // the callbacks below may run before start returns
	defer c.mu.Unlock()
	if parent.Done() != nil { // else the parent is never done
		c.stopParent = context.AfterFunc(parent, func() { c.end(parentEnded) })
	}
	c.timer = time.AfterFunc(timeout, func() { c.end(timedOut) })
}

// end ends the attempt for the reason why, unless it ended already or, for
// its own timeout, the timeout was switched off: checked under mu, so once
// stopTimeout reported the attempt alive, a late timer never ends it. The
// registered functions call back into c, so they run after mu is released.
func (c *attemptCtx) end(why int) {
	c.mu.Lock()
	if c.why != running || (why == timedOut && c.stopped) {
		c.mu.Unlock()
		return
	}
	c.why = why
	if c.done != nil {
		close(c.done)
	}
	t, stop, first, more, cl := c.timer, c.stopParent, c.first, c.more, c.closer
	c.timer, c.stopParent, c.first, c.more, c.closer = nil, nil, nil, nil, nil
	c.mu.Unlock()
	if cl != nil {
		// In a goroutine of its own: end may run in one that the body's
		// Close would wait for (net/http's, asking for Err).
		go cl.Close()
	}
	if t != nil {
		t.Stop()
	}
	if stop != nil {
		stop()
	}
	if first != nil {
		first()
	}
	for f := range more {
		(*f)()
	}
}

// stopTimeout switches the timeout off and leaves the context alive. It
// reports whether the attempt was still running.
func (c *attemptCtx) stopTimeout() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop() // never waits for the timer's end: that takes mu
		c.timer = nil
	}
	return c.why == running && c.parent.Err() == nil
}

// release ends the attempt once its result is no longer needed, if not yet.
func (c *attemptCtx) release() { c.end(released) }

// timedOut reports whether the attempt's own timeout ended it.
func (c *attemptCtx) timedOut() bool {
	_ = c.Err() // settles a parent that ended before its watch ran
	return c.state() == timedOut
}

// state returns why the attempt ended, or running.
func (c *attemptCtx) state() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.why
}

// Deadline returns the attempt's own deadline, or the parent's when that is
// sooner or stopTimeout switched the timeout off.
func (c *attemptCtx) Deadline() (time.Time, bool) {
	pd, ok := c.parent.Deadline()
	c.mu.Lock()
	own := !c.stopped
	c.mu.Unlock()
	if own && (!ok || c.deadline.Before(pd)) {
		return c.deadline, true
	}
	return pd, ok
}

// Done returns a channel closed when the attempt ends.
func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.why != running {
			close(c.done)
		}
	}
	return c.done
}

// Err returns nil while the attempt runs, then why it ended. The parent is
// read directly, so that Err agrees with it even before the watch on the
// parent has run: that watch runs in a goroutine of its own.
func (c *attemptCtx) Err() error {
	why := c.state()
	if why == running {
		if c.parent.Err() == nil {
			return nil
		}
		c.end(parentEnded)
		return c.Err()
	}
	switch why {
	case timedOut, idled:
		return context.DeadlineExceeded
	case released:
		return context.Canceled
	}
	return c.parent.Err()
}

// Value returns the attempt's number for attemptKey (AttemptFromContext),
// and else the parent's value for key, but one, so that context.Cause
// agrees with Err. Cause reports the cause of the nearest standard
// cancelable context, found through Value(causeKey): for an attempt that
// ended on its own, the parent's, which a later cancel of the parent would
// change. Hidden, Cause reports Err, as for a context.WithTimeout child.
func (c *attemptCtx) Value(key any) any {
	if _, ok := key.(attemptKey); ok {
		return c.n
	}
	if key == causeKey {
		if why := c.state(); why != running && why != parentEnded {
			return nil
		}
	}
	return c.parent.Value(key)
}

// causeKey is the key context.Cause passes to Value, which the context
// package does not export. It is learned once by asking Cause about a
// context that records the key it is asked for.
var causeKey = func() any {
	var s keySpy
	_ = context.Cause(&s)
	return s.key
}()

// keySpy is an ended context that records the key Value is asked for.
type keySpy struct{ key any }

func (*keySpy) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keySpy) Done() <-chan struct{}       { return nil }
func (*keySpy) Err() error                  { return context.Canceled } // Cause asks Value only for an ended context
func (s *keySpy) Value(key any) any         { s.key = key; return nil }

// AfterFunc arranges to call f once the attempt ends. The context package
// calls it for every context derived from the attempt, with an f that
// cancels that context: quick, and harmless to call twice. The first
// registration (net/http makes one per attempt) costs no allocation, and
// its stop never keeps f from running: the context package ignores what
// stop reports, and f then cancels a context cancelled already. Later ones
// get a stop that forgets them, so contexts derived and cancelled in turn
// leave nothing behind.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.why != running:
		go f() // the context package holds a lock f takes: f cannot run here
		return notStopped
	case c.first == nil:
		c.first = f
		return notStopped
	}
	if c.more == nil {
		c.more = make(map[*func()]struct{})
	}
	key := new(func()) // not &f: f would move to the heap on every call
	*key = f
	c.more[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, waiting := c.more[key] // end takes the map before it runs them
		delete(c.more, key)
		return waiting
	}
}

// notStopped is the stop of a registration that always runs, or has run.
func notStopped() bool { return false }
