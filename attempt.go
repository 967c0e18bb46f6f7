package retry

import (
	"context"
	"math"
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

	// state holds why the attempt ended (endMask), whether its timeout is in
	// force (stTimeoutOn), whether it is watched (stWatching), and a
	// generation that rearm advances, so that a change made for one attempt
	// never applies to the next. It changes only by compare-and-swap. An
	// unwatched attempt has no channel, timer or registration to free, so
	// its state changes take no lock; once watched, they take mu.
	state    atomic.Uint32
	deadline atomic.Int64 // a monoNow reading: when the attempt's time is up

	mu    sync.Mutex    // protects the fields below
	done  chan struct{} // made by the first Done
	timer *attemptTimer // armed while watched and the timeout is in force
	after func()        // the first AfterFunc registration, if any
	ext   *attemptExt   // what few attempts need; nil until then
}

// attemptExt holds the parts of an attemptCtx that few attempts need, out
// of line to keep the common one small.
type attemptExt struct {
	stopParent func() bool // unregisters from the parent; nil if not registered
	more       *afterFunc  // AfterFunc registrations after the first, newest first
}

// afterFunc is an AfterFunc registration after the first, in a list that
// its stop function unlinks it from: a context derived from the attempt and
// cancelled leaves nothing behind.
type afterFunc struct {
	c          *attemptCtx
	f          func()
	prev, next *afterFunc
	started    bool // the attempt ended and f runs; guarded by c.mu
}

func (a *afterFunc) stop() bool {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.started || c.ext == nil {
		return false
	}
	switch {
	case a.prev != nil:
		a.prev.next = a.next
	case c.ext.more == a:
		c.ext.more = a.next
	default:
		return false // stopped already
	}
	if a.next != nil {
		a.next.prev = a.prev
	}
	a.prev, a.next = nil, nil
	return true
}

// The parts of attemptCtx.state.
const (
	endMask     uint32 = 7 // why the attempt is over: one of the end values
	stTimeoutOn uint32 = 1 << 3
	stWatching  uint32 = 1 << 4
	stDetached  uint32 = 1 << 5 // see detach
	genUnit     uint32 = 1 << 6 // the generation counts in the bits above; it may wrap
)

// Why an attempt is over.
const (
	endNone     uint32 = iota
	endTimeout         // its own timeout passed: context.DeadlineExceeded
	endIdle            // its body idled too long: context.DeadlineExceeded
	endReleased        // released: context.Canceled
	endParent          // the parent is done: the parent's error
)

// init arms c for an attempt of at most timeout under parent that began at
// start, a monoNow reading; zero means now. The loop passes the clock
// reading it has just taken, to spare another. c must not be in use yet.
func (c *attemptCtx) init(parent context.Context, start int64, timeout time.Duration) {
	if start == 0 {
		start = monoNow()
	}
	c.parent = parent
	c.deadline.Store(deadlineAfter(start, timeout))
	c.state.Store(stTimeoutOn)
}

// deadlineAfter returns the monoNow reading timeout after start, saturating
// rather than wrapping into the past for a timeout as long as "no limit".
func deadlineAfter(start int64, timeout time.Duration) int64 {
	if timeout > 0 && start > math.MaxInt64-int64(timeout) {
		return math.MaxInt64
	}
	return start + int64(timeout)
}

// rearm starts another attempt on c, of at most timeout from start (a
// monoNow reading), after stopTimeout ended the last one. It reports false
// if c is over, or was ever watched, and then cannot serve another attempt:
// whatever watched an attempt (a derived context, a goroutine waiting on
// Done) must see it end before the next one begins. An attempt nothing
// watched left nothing behind.
func (c *attemptCtx) rearm(start int64, timeout time.Duration) bool {
	if c.parent.Err() != nil {
		return false
	}
	d := deadlineAfter(start, timeout)
	for {
		s := c.state.Load()
		if s&(endMask|stWatching|stDetached) != 0 {
			return false // see unwatched
		}
		// Stored before the state says the timeout is on, so that whoever
		// sees it on reads this deadline.
		c.deadline.Store(d)
		if c.state.CompareAndSwap(s, (s+genUnit)|stTimeoutOn) {
			return true
		}
	}
}

// unwatched reports that nothing watched the attempt, nor ended it: rearm
// may take it for the next attempt.
func (c *attemptCtx) unwatched() bool {
	return c.state.Load()&(endMask|stWatching|stDetached) == 0
}

// Deadline returns the attempt's deadline while its timeout is in force, or
// the parent's if that is sooner.
func (c *attemptCtx) Deadline() (time.Time, bool) {
	pd, pok := c.parent.Deadline()
	if c.state.Load()&stTimeoutOn == 0 {
		return pd, pok
	}
	if own := epoch.Add(time.Duration(c.deadline.Load())); !pok || own.Before(pd) {
		return own, true
	}
	return pd, pok
}

// detach turns an attempt that nothing watched into a view of its parent,
// for the rest of its life, and reports whether it did: its timeout is off,
// nothing will release it, and Done and AfterFunc hand over to the parent.
// Its response body then needs no wrapper, since there is nothing to
// release: no channel, timer or registration was made, and none will be.
func (c *attemptCtx) detach() bool {
	for {
		s := c.state.Load()
		if s&(stWatching|endMask) != 0 {
			return false
		}
		if c.state.CompareAndSwap(s, s&^stTimeoutOn|stDetached) {
			return true
		}
	}
}

// Done returns a channel closed when the attempt is over.
func (c *attemptCtx) Done() <-chan struct{} {
	if c.state.Load()&stDetached != 0 {
		return c.parent.Done()
	}
	c.mu.Lock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	d := c.done
	switch c.watchLocked() {
	case watchDetached:
		c.mu.Unlock()
		return c.parent.Done()
	case watchOver:
		c.closeDoneLocked()
		c.mu.Unlock()
	case watchExpired:
		c.endLocked(endTimeout) // unlocks c.mu
	default:
		c.mu.Unlock()
	}
	return d
}

// What watchLocked found.
const (
	watchOn       = iota // the attempt is watched
	watchOver            // the attempt is over
	watchExpired         // the attempt is watched, and its deadline has passed
	watchDetached        // the attempt was detached: its parent is to be watched instead
)

// watchLocked registers with the parent and arms the timer, once, so that
// the attempt ends on its own when its time is up or the parent is done.
// It is called, and returns, with c.mu held.
func (c *attemptCtx) watchLocked() int {
	for {
		s := c.state.Load()
		if s&endMask != endNone {
			return watchOver
		}
		if s&stDetached != 0 {
			return watchDetached
		}
		if s&stWatching != 0 {
			return watchOn
		}
		if !c.state.CompareAndSwap(s, s|stWatching) {
			continue
		}
		if c.parent.Done() != nil {
			if c.ext == nil {
				c.ext = new(attemptExt)
			}
			c.ext.stopParent = context.AfterFunc(c.parent, c.parentDone)
		}
		if s&stTimeoutOn != 0 && !c.armLocked() {
			return watchExpired
		}
		return watchOn
	}
}

// armLocked starts the timer for the deadline, with c.mu held. It reports
// false, starting none, if the deadline has passed.
func (c *attemptCtx) armLocked() bool {
	wait := time.Duration(c.deadline.Load() - monoNow())
	if wait <= 0 {
		return false
	}
	t := timerPool.Get().(*attemptTimer)
	t.start(c, wait)
	c.timer = t
	return true
}

// Err returns nil while the attempt runs; then context.DeadlineExceeded if
// its timeout passed, or the parent's error, or context.Canceled once it was
// released.
func (c *attemptCtx) Err() error {
	s := c.state.Load()
	if s&endMask != endNone && s&stWatching != 0 {
		// A watched attempt publishes its end a moment before it closes
		// its channel, both under mu: waiting for mu means Err never
		// reports an end while Done is still open.
		c.mu.Lock()
		d := c.done
		c.mu.Unlock()
		if d != nil {
			<-d // closed already
		}
	}
	switch s & endMask {
	case endTimeout, endIdle:
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
	if s&(stTimeoutOn|stWatching) == stTimeoutOn && monoNow() >= c.deadline.Load() {
		c.expire()
		return c.Err()
	}
	return nil
}

// Value returns the parent's value for key.
func (c *attemptCtx) Value(key any) any { return c.parent.Value(key) }

func (c *attemptCtx) parentDone() { c.cancel(endParent) }

// expire is the timer's work: end the attempt, unless its timeout was
// switched off or its deadline is still ahead. The checks and the end are
// one compare-and-swap of the state, so an attempt whose timeout
// stopTimeout switched off is never ended by a late timer, nor is the next
// attempt rearm started by the last one's timer (a timer never fires before
// its time).
func (c *attemptCtx) expire() {
	for {
		s := c.state.Load()
		if s&endMask != endNone || s&stTimeoutOn == 0 || monoNow() < c.deadline.Load() {
			return
		}
		if c.endFrom(s, endTimeout) {
			return
		}
	}
}

// cancel ends the attempt, once, for the reason end, and frees its timer and
// its registration with the parent.
func (c *attemptCtx) cancel(end uint32) {
	for {
		s := c.state.Load()
		if s&endMask != endNone {
			return // the common second release: a body closed after its EOF
		}
		if c.endFrom(s, end) {
			return
		}
	}
}

// endFrom ends the attempt for the reason end if its state is still s, and
// reports whether it did.
func (c *attemptCtx) endFrom(s, end uint32) bool {
	if s&stWatching == 0 {
		// Nothing to free: no channel was handed out, no timer or
		// registration made. Watching takes a swap too, so one of the two
		// fails and sees the other.
		return c.state.CompareAndSwap(s, s|end)
	}
	c.mu.Lock()
	if !c.state.CompareAndSwap(s, s|end) {
		c.mu.Unlock()
		return false
	}
	c.finishLocked() // unlocks c.mu
	return true
}

// endLocked ends a watched attempt for the reason end, with c.mu held; it
// unlocks c.mu.
func (c *attemptCtx) endLocked(end uint32) {
	for {
		s := c.state.Load()
		if s&endMask != endNone {
			c.mu.Unlock()
			return
		}
		if c.state.CompareAndSwap(s, s|end) {
			c.finishLocked()
			return
		}
	}
}

// finishLocked frees what a watched attempt that just ended holds, with
// c.mu held; it unlocks c.mu. The functions registered by AfterFunc run
// after the lock is released.
func (c *attemptCtx) finishLocked() {
	c.closeDoneLocked()
	t, after := c.timer, c.after
	c.timer, c.after = nil, nil
	var stop func() bool
	var more *afterFunc
	if c.ext != nil {
		stop, more = c.ext.stopParent, c.ext.more
		c.ext.stopParent, c.ext.more = nil, nil
		for a := more; a != nil; a = a.next {
			a.started = true // stop now reports false and leaves the list be
		}
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
	for a := more; a != nil; {
		next := a.next
		a.prev, a.next = nil, nil // a derived context still in use keeps no other alive
		a.f()
		a = next
	}
}

// closeDoneLocked closes the Done channel, if made and still open, with
// c.mu held: every close happens under the lock.
func (c *attemptCtx) closeDoneLocked() {
	if c.done == nil {
		return
	}
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

// stopTimeout switches the attempt's timeout off, leaving the context alive.
// It reports false if the attempt was already over: its timeout fired while
// it was watched, or the parent is done. (An attempt nobody watched could
// not have been cut short by its timeout, and is not ended by it here.)
func (c *attemptCtx) stopTimeout() bool {
	for {
		s := c.state.Load()
		if s&stWatching == 0 {
			if !c.state.CompareAndSwap(s, s&^stTimeoutOn) {
				continue
			}
			return s&endMask == endNone && c.parent.Err() == nil
		}
		c.mu.Lock()
		s = c.state.And(^stTimeoutOn)
		t := c.timer
		c.timer = nil
		c.mu.Unlock()
		if t != nil {
			t.stop()
		}
		return s&endMask == endNone && c.parent.Err() == nil
	}
}

// cut reports whether the attempt's own timeout ended it while something
// watched it: only then can it have cut what the attempt was reading.
func (c *attemptCtx) cut() bool {
	return c.state.Load()&stWatching != 0 && c.timedOut()
}

// timedOut reports whether the attempt ended by its own timeout.
func (c *attemptCtx) timedOut() bool {
	_ = c.Err() // settles a deadline that passed while nothing watched
	return c.state.Load()&endMask == endTimeout && c.parent.Err() == nil
}

// release ends the attempt once its result is no longer needed.
func (c *attemptCtx) release() { c.cancel(endReleased) }

// AfterFunc arranges to call f once the attempt is over. It is meant for the
// context package, which calls it for every context derived from the
// attempt with a function that cancels that context: quick, and harmless to
// call again. So f runs in the goroutine that ends the attempt. The first
// registration costs no allocation: its stop never keeps f from running (the
// context package ignores what stop reports, and f then cancels a context
// cancelled already). Later ones get a stop that removes them, so an
// attempt from which many contexts are derived and cancelled in turn keeps
// none of them.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	if c.state.Load()&stDetached != 0 {
		return context.AfterFunc(c.parent, f)
	}
	c.mu.Lock()
	switch c.watchLocked() {
	case watchDetached:
		c.mu.Unlock()
		return context.AfterFunc(c.parent, f)
	case watchOver:
		c.closeDoneLocked()
		c.mu.Unlock()
		// The context package holds a lock f takes: f cannot run here.
		go f()
		return notStopped
	case watchExpired:
		c.endLocked(endTimeout) // unlocks c.mu
		go f()
		return notStopped
	}
	if c.after == nil {
		c.after = f
		c.mu.Unlock()
		return notStopped
	}
	if c.ext == nil {
		c.ext = new(attemptExt)
	}
	a := &afterFunc{c: c, f: f, next: c.ext.more}
	if a.next != nil {
		a.next.prev = a
	}
	c.ext.more = a
	c.mu.Unlock()
	return a.stop
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
