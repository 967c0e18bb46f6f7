package retry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// epoch anchors monoNow's readings.
var epoch = time.Now()

// monoNow reads the monotonic clock, in nanoseconds since epoch. It costs
// half of time.Now, which reads the wall clock too, and attempts need only
// the monotonic one.
func monoNow() int64 { return int64(time.Since(epoch)) }

// attemptCtx is the context of one attempt: done when the caller's context is
// done, when the attempt's timeout passes while it is still in force, or when
// the attempt is released.
//
// It differs from context.WithTimeout in three ways the Transport needs. Its
// timeout can be switched off without cancelling it (stopTimeout), so the
// attempt timeout ends at the response headers while the body stays
// readable; and it can be switched on again for the next attempt (rearm), so
// one context serves every attempt of a call that ends each of them without
// cancelling it. And it is cheap: embedded in the value that uses it, and
// nothing is set up until someone watches it. A base that never asks for
// Done (one answering from memory) costs no timer and no registration with
// the parent; Err and timedOut then read the clock to see whether the
// deadline passed. The first Done (or AfterFunc) arms a pooled timer and
// registers with the parent.
//
// It implements AfterFunc, which the context package uses for contexts
// derived from it: net/http derives one for every request, and without the
// method each would need a goroutine of its own to watch the attempt.
type attemptCtx struct {
	parent context.Context

	mu        sync.Mutex    // protects the fields below
	deadline  int64         // a monoNow reading: when the attempt's time is up
	end       atomic.Uint32 // why the attempt is over: endNone while it runs; written under mu
	timeoutOn bool          // the deadline applies
	watching  bool          // watchLocked ran: the parent is watched, the timer armed while timeoutOn
	done      chan struct{}
	timer     *attemptTimer // armed while watching and timeoutOn
	after     func()        // the first AfterFunc registration, if any
	ext       *attemptExt   // what few attempts need; nil until then
}

// attemptExt holds the parts of an attemptCtx that few attempts need, out
// of line to keep the common one small.
type attemptExt struct {
	stopParent func() bool // unregisters from the parent; nil if not registered
	more       []func()    // AfterFunc registrations after the first
}

// Why an attempt is over, for attemptCtx.end.
const (
	endNone     uint32 = iota
	endTimeout         // its own timeout passed: context.DeadlineExceeded
	endReleased        // released: context.Canceled
	endParent          // the parent is done: the parent's error
)

// init arms c for an attempt of at most timeout under parent that began at
// start, a monoNow reading; zero means now. The loop passes the clock
// reading it has just taken, to spare another.
func (c *attemptCtx) init(parent context.Context, start int64, timeout time.Duration) {
	if start == 0 {
		start = monoNow()
	}
	c.parent = parent
	c.deadline = start + int64(timeout)
	c.timeoutOn = true
}

// rearm starts another attempt on c, of at most timeout from start (a
// monoNow reading), after stopTimeout ended the last one. It reports false
// if c is over, and then cannot serve another attempt.
func (c *attemptCtx) rearm(start int64, timeout time.Duration) bool {
	c.mu.Lock()
	if c.end.Load() != endNone || c.parent.Err() != nil {
		c.mu.Unlock()
		return false
	}
	c.deadline = start + int64(timeout)
	c.timeoutOn = true
	if c.watching {
		c.startTimerLocked() // unlocks c.mu
		return true
	}
	c.mu.Unlock()
	return true
}

// Deadline returns the attempt's deadline while its timeout is in force, or
// the parent's if that is sooner.
func (c *attemptCtx) Deadline() (time.Time, bool) {
	pd, pok := c.parent.Deadline()
	c.mu.Lock()
	on, d := c.timeoutOn, c.deadline
	c.mu.Unlock()
	if !on {
		return pd, pok
	}
	if own := epoch.Add(time.Duration(d)); !pok || own.Before(pd) {
		return own, true
	}
	return pd, pok
}

// Done returns a channel closed when the attempt is over.
func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.end.Load() != endNone {
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
	if c.watching || c.end.Load() != endNone {
		c.mu.Unlock()
		return
	}
	c.watching = true
	if c.parent.Done() != nil {
		// Registered before the timer starts, so that a cancel by either
		// finds the registration to undo.
		if c.ext == nil {
			c.ext = new(attemptExt)
		}
		c.ext.stopParent = context.AfterFunc(c.parent, c.parentDone)
	}
	if c.timeoutOn {
		c.startTimerLocked() // unlocks c.mu
		return
	}
	c.mu.Unlock()
}

// startTimerLocked arms the timer for the deadline, or ends the attempt if
// the deadline has passed. It is called with c.mu held and unlocks it.
func (c *attemptCtx) startTimerLocked() {
	wait := time.Duration(c.deadline - monoNow())
	if wait <= 0 {
		c.cancelLocked(endTimeout)
		return
	}
	t := timerPool.Get().(*attemptTimer)
	t.start(c, wait)
	c.timer = t
	c.mu.Unlock()
}

// Err returns nil while the attempt runs; then context.DeadlineExceeded if
// its timeout passed, or the parent's error, or context.Canceled once it was
// released.
func (c *attemptCtx) Err() error {
	end := c.end.Load()
	var unwatched bool
	var deadline int64
	if end == endNone {
		c.mu.Lock()
		end = c.end.Load()
		unwatched = end == endNone && c.timeoutOn && !c.watching
		deadline = c.deadline
		c.mu.Unlock()
	}
	switch end {
	case endTimeout:
		return context.DeadlineExceeded
	case endReleased:
		return context.Canceled
	case endParent:
		return c.parent.Err()
	}
	// The parent is read directly so Err agrees with it even before
	// parentDone runs, or when nothing asked for Done.
	if perr := c.parent.Err(); perr != nil {
		c.cancel(endParent)
		return c.Err()
	}
	// No timer runs for an attempt nobody watched: the clock says whether
	// its time is up.
	if unwatched && monoNow() >= deadline {
		c.expire()
		return c.Err()
	}
	return nil
}

// Value returns the parent's value for key.
func (c *attemptCtx) Value(key any) any { return c.parent.Value(key) }

func (c *attemptCtx) parentDone() { c.cancel(endParent) }

// expire is the timer's work: cancel, unless the timeout was switched off
// or the deadline is still ahead. The checks and the cancel share one
// critical section, so an attempt whose timeout stopTimeout switched off is
// never cancelled by a late timer, nor is the next attempt rearm started by
// the last one's timer (a timer never fires before its time).
func (c *attemptCtx) expire() {
	c.mu.Lock()
	if !c.timeoutOn || monoNow() < c.deadline {
		c.mu.Unlock()
		return
	}
	c.cancelLocked(endTimeout)
}

// cancel ends the attempt, once, for the reason end, and frees its timer and
// its registration with the parent.
func (c *attemptCtx) cancel(end uint32) {
	if c.end.Load() != endNone {
		return // the common second release: a body closed after its EOF
	}
	c.mu.Lock()
	c.cancelLocked(end)
}

// cancelLocked is cancel with c.mu held; it unlocks c.mu. The functions
// registered by AfterFunc run after the lock is released.
func (c *attemptCtx) cancelLocked(end uint32) {
	if c.end.Load() != endNone {
		c.mu.Unlock()
		return
	}
	c.end.Store(end)
	if c.done != nil {
		close(c.done)
	}
	t, after := c.timer, c.after
	c.timer, c.after = nil, nil
	var stop func() bool
	var more []func()
	if c.ext != nil {
		stop, more = c.ext.stopParent, c.ext.more
		c.ext.stopParent, c.ext.more = nil, nil
	}
	c.mu.Unlock()
	if t != nil {
		t.stop()
	}
	if stop != nil {
		stop()
	}
	if after != nil {
		after()
	}
	for _, f := range more {
		f()
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
	alive := c.end.Load() == endNone
	c.mu.Unlock()
	if t != nil {
		t.stop()
	}
	return alive && c.parent.Err() == nil
}

// timedOut reports whether the attempt ended by its own timeout.
func (c *attemptCtx) timedOut() bool {
	_ = c.Err() // settles a deadline that passed while nothing watched
	return c.end.Load() == endTimeout && c.parent.Err() == nil
}

// release ends the attempt once its result is no longer needed.
func (c *attemptCtx) release() { c.cancel(endReleased) }

// AfterFunc arranges to call f once the attempt is over. It is meant for the
// context package, which calls it for every context derived from the
// attempt with a function that cancels that context: quick, and harmless to
// call again. So f runs in the goroutine that ends the attempt, and stop
// never keeps it from running; the context package ignores what stop
// reports. Neither costs an allocation for the first registration.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.end.Load() != endNone {
		c.mu.Unlock()
		// The context package may hold a lock f takes: f cannot run here.
		go f()
		return notStopped
	}
	if c.after == nil {
		c.after = f
	} else {
		if c.ext == nil {
			c.ext = new(attemptExt)
		}
		c.ext.more = append(c.ext.more, f)
	}
	c.watchLocked() // unlocks c.mu
	return notStopped
}

// notStopped is the stop function attemptCtx.AfterFunc returns: its function
// runs, or has run, when the attempt ends.
func notStopped() bool { return false }

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
// parent that began at start (a monoNow reading; zero: now); release it
// when the attempt is over.
func newAttempt(parent context.Context, start int64, timeout time.Duration) *attemptCtx {
	c := new(attemptCtx)
	c.init(parent, start, timeout)
	return c
}
