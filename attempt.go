package retry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is the context of one attempt: done when the caller's context is
// done, when the attempt's timeout fires while it is still in force, or when
// the attempt is released.
//
// It differs from context.WithTimeout in two ways the Transport needs. Its
// timeout can be switched off without cancelling it (stopTimeout), so the
// attempt timeout ends at the response headers while the body stays
// readable. And it is cheap: embedded in the value that uses it, with a
// pooled timer, and no goroutine or registration with the parent until
// someone asks for Done.
type attemptCtx struct {
	parent   context.Context
	deadline time.Time // the attempt's own deadline, in real time

	mu         sync.Mutex
	done       chan struct{} // made on first use; closed when canceled
	err        error         // set once, when canceled
	timeoutOn  bool          // the deadline still applies
	timer      *attemptTimer // nil once stopped or fired
	watching   bool          // stopParent was set up
	stopParent func() bool   // unregisters from the parent; nil if not watched
}

// init arms c for an attempt of at most timeout under parent.
func (c *attemptCtx) init(parent context.Context, timeout time.Duration) {
	c.parent = parent
	c.deadline = time.Now().Add(timeout)
	c.timeoutOn = true
	t := timerPool.Get().(*attemptTimer)
	// A short timeout may fire before start returns: holding c.mu makes
	// expire wait until c.timer and t.t are both set.
	c.mu.Lock()
	c.timer = t
	t.start(c, timeout)
	c.mu.Unlock()
}

// Deadline returns the attempt's deadline while its timeout is in force, or
// the parent's if that is sooner.
func (c *attemptCtx) Deadline() (time.Time, bool) {
	pd, pok := c.parent.Deadline()
	c.mu.Lock()
	on := c.timeoutOn
	c.mu.Unlock()
	if on && (!pok || c.deadline.Before(pd)) {
		return c.deadline, true
	}
	return pd, pok
}

// Done returns a channel closed when the attempt is over.
func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
			return c.done
		}
	}
	if !c.watching && c.err == nil {
		c.watching = true
		if c.parent.Done() != nil {
			c.stopParent = context.AfterFunc(c.parent, c.parentDone)
		}
	}
	return c.done
}

// Err returns nil while the attempt runs; then context.DeadlineExceeded if
// its timeout fired, or the parent's error, or context.Canceled once it was
// released.
func (c *attemptCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// The parent is read directly so Err agrees with it even before
	// parentDone runs, or when nothing asked for Done.
	if perr := c.parent.Err(); perr != nil {
		c.cancel(perr)
		return c.Err()
	}
	return nil
}

// Value returns the parent's value for key.
func (c *attemptCtx) Value(key any) any { return c.parent.Value(key) }

func (c *attemptCtx) parentDone() { c.cancel(c.parent.Err()) }

// expire is the timer's work: cancel, unless the timeout was switched off.
// The check and the cancel share one critical section, so an attempt whose
// timeout stopTimeout switched off is never cancelled by a late timer.
func (c *attemptCtx) expire() {
	c.mu.Lock()
	if !c.timeoutOn {
		c.mu.Unlock()
		return
	}
	c.cancelLocked(context.DeadlineExceeded)
}

// cancel ends the attempt with err, once, and frees its timer and its
// registration with the parent.
func (c *attemptCtx) cancel(err error) {
	c.mu.Lock()
	c.cancelLocked(err)
}

// cancelLocked is cancel with c.mu held; it unlocks c.mu.
func (c *attemptCtx) cancelLocked(err error) {
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	t, stop := c.timer, c.stopParent
	c.timer, c.stopParent = nil, nil
	c.mu.Unlock()
	if t != nil {
		t.stop()
	}
	if stop != nil {
		stop()
	}
}

// stopTimeout switches the attempt's timeout off, leaving the context alive.
// It reports false if the attempt was already over (its timeout fired, or
// the parent is done).
func (c *attemptCtx) stopTimeout() bool {
	c.mu.Lock()
	c.timeoutOn = false
	t := c.timer
	c.timer = nil
	alive := c.err == nil
	c.mu.Unlock()
	if t != nil {
		t.stop()
	}
	return alive && c.parent.Err() == nil
}

// timedOut reports whether the attempt ended by its own timeout.
func (c *attemptCtx) timedOut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == context.DeadlineExceeded && c.parent.Err() == nil
}

// release ends the attempt once its result is no longer needed.
func (c *attemptCtx) release() { c.cancel(context.Canceled) }

// attemptTimer is a reusable timer for attempt timeouts. Creating a timer
// costs two allocations (the timer and the closure it runs), so stopped
// timers go back to timerPool instead. A timer whose Stop reports false has
// started its function in another goroutine, which may still read target; it
// is never reused.
type attemptTimer struct {
	t      *time.Timer
	target atomic.Pointer[attemptCtx]
}

// timerPool caches stopped attempt timers. It holds no state a caller can
// observe: an internal allocation cache, like net/http's buffer pools.
var timerPool = sync.Pool{New: func() any { return new(attemptTimer) }}

func (t *attemptTimer) start(c *attemptCtx, d time.Duration) {
	t.target.Store(c)
	if t.t == nil {
		t.t = time.AfterFunc(d, t.fire)
		return
	}
	t.t.Reset(d)
}

func (t *attemptTimer) fire() {
	if c := t.target.Load(); c != nil {
		c.expire()
	}
}

func (t *attemptTimer) stop() {
	if t.t.Stop() {
		t.target.Store(nil)
		timerPool.Put(t)
	}
}

// newAttempt returns a context for one attempt of at most timeout under
// parent; release it when the attempt is over.
func newAttempt(parent context.Context, timeout time.Duration) *attemptCtx {
	c := new(attemptCtx)
	c.init(parent, timeout)
	return c
}
