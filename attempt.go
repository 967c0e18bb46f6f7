package retry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is the context of one attempt: done when the caller's context is
// done, when the attempt's timeout passes while it is still in force, or when
// the attempt is released.
//
// It differs from context.WithTimeout in two ways the Transport needs. Its
// timeout can be switched off without cancelling it (stopTimeout), so the
// attempt timeout ends at the response headers while the body stays
// readable. And it is cheap: embedded in the value that uses it, and nothing
// is set up until someone watches it. A base that never asks for Done (one
// answering from memory) costs no timer and no registration with the parent;
// Err and timedOut then read the clock to see whether the deadline passed.
// The first Done (or AfterFunc) arms a pooled timer and registers with the
// parent.
//
// It implements AfterFunc, which the context package uses for contexts
// derived from it: net/http derives one for every request, and without the
// method each would need a goroutine of its own to watch the attempt.
type attemptCtx struct {
	parent   context.Context
	deadline time.Time // the attempt's own deadline, in real time

	mu         sync.Mutex    // protects the fields below
	done       chan struct{} // made on first use; closed when canceled
	err        error         // set once, when canceled
	timeoutOn  bool          // the deadline still applies
	watching   bool          // watchLocked ran: the timer and the parent are armed
	afterState uint8         // of after: afterPending, afterStopped or afterStarted
	timer      *attemptTimer // nil until watched, and once stopped or fired
	stopParent func() bool   // unregisters from the parent; nil if not watched
	after      func()        // the first AfterFunc registration, if any
	more       *afterFunc    // any further registrations, newest first
}

// init arms c for an attempt of at most timeout under parent that began at
// start, in real time; a zero start means now. The loop passes the clock
// reading it has just taken, to spare another.
func (c *attemptCtx) init(parent context.Context, start time.Time, timeout time.Duration) {
	if start.IsZero() {
		start = time.Now()
	}
	c.parent = parent
	c.deadline = start.Add(timeout)
	c.timeoutOn = true
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
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	d := c.done
	c.watchLocked() // unlocks c.mu
	return d
}

// watchLocked arms the timer and registers with the parent, once, so that
// the attempt ends on its own when its time is up or the parent is done. It
// is called with c.mu held and unlocks it.
func (c *attemptCtx) watchLocked() {
	if c.watching || c.err != nil {
		c.mu.Unlock()
		return
	}
	c.watching = true
	if c.timeoutOn {
		wait := time.Until(c.deadline)
		if wait <= 0 {
			c.cancelLocked(context.DeadlineExceeded)
			return
		}
		t := timerPool.Get().(*attemptTimer)
		t.start(c, wait)
		c.timer = t
	}
	if c.parent.Done() != nil {
		c.stopParent = context.AfterFunc(c.parent, c.parentDone)
	}
	c.mu.Unlock()
}

// Err returns nil while the attempt runs; then context.DeadlineExceeded if
// its timeout passed, or the parent's error, or context.Canceled once it was
// released.
func (c *attemptCtx) Err() error {
	c.mu.Lock()
	err := c.err
	unwatched := err == nil && c.timeoutOn && !c.watching
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
	// No timer runs for an attempt nobody watched: the clock says whether
	// its time is up.
	if unwatched && !time.Now().Before(c.deadline) {
		c.expire()
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

// cancelLocked is cancel with c.mu held; it unlocks c.mu. The functions
// registered by AfterFunc start after the lock is released, each in its own
// goroutine, as context.AfterFunc promises.
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
	first := c.after != nil && c.afterState == afterPending
	if first {
		c.afterState = afterStarted
	}
	more := c.more
	for a := more; a != nil; a = a.next {
		if a.state == afterPending {
			a.state = afterStarted
			a.run = true
		}
	}
	c.mu.Unlock()
	if t != nil {
		t.stop()
	}
	if stop != nil {
		stop()
	}
	if first {
		go c.after()
	}
	for a := more; a != nil; a = a.next {
		if a.run {
			go a.f()
		}
	}
}

// stopTimeout switches the attempt's timeout off, leaving the context alive.
// It reports false if the attempt was already over: its timeout fired while
// it was watched, or the parent is done. (An attempt nobody watched could
// not have been cut short by its timeout, and is not ended by it here.)
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
	_ = c.Err() // settles a deadline that passed while nothing watched
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == context.DeadlineExceeded && c.parent.Err() == nil
}

// release ends the attempt once its result is no longer needed.
func (c *attemptCtx) release() { c.cancel(context.Canceled) }

// AfterFunc arranges to call f in its own goroutine once the attempt is
// over, with the meaning of context.AfterFunc: the returned stop reports
// true if it kept f from running.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return stopped
	}
	if c.after == nil {
		c.after = f
		stop = c.stopAfter
	} else {
		a := &afterFunc{c: c, f: f, next: c.more}
		c.more = a
		stop = a.stop
	}
	c.watchLocked() // unlocks c.mu
	return stop
}

// stopAfter is the stop function of the first AfterFunc registration.
func (c *attemptCtx) stopAfter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.afterState != afterPending {
		return false
	}
	c.afterState = afterStopped
	return true
}

// The states of an AfterFunc registration.
const (
	afterPending uint8 = iota
	afterStopped
	afterStarted
)

// afterFunc is an AfterFunc registration after the first.
type afterFunc struct {
	c     *attemptCtx
	f     func()
	next  *afterFunc
	state uint8 // guarded by c.mu
	run   bool  // started by cancelLocked; guarded by c.mu
}

func (a *afterFunc) stop() bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	if a.state != afterPending {
		return false
	}
	a.state = afterStopped
	return true
}

// stopped is the stop function of a registration made after the attempt
// was over: its function has started already.
func stopped() bool { return false }

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
// parent that began at start (zero: now); release it when the attempt is
// over.
func newAttempt(parent context.Context, start time.Time, timeout time.Duration) *attemptCtx {
	c := new(attemptCtx)
	c.init(parent, start, timeout)
	return c
}
