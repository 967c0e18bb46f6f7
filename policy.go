package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry/internal/wire"
)

// The defaults that a zero [Policy] field takes.
const (
	DefaultMaxAttempts    = 5
	DefaultAttemptTimeout = 10 * time.Second
	DefaultDeadline       = 60 * time.Second
	DefaultBase           = 500 * time.Millisecond
	DefaultCap            = 30 * time.Second
)

// Policy says how often, how long and how patiently to retry.
//
// The zero Policy is ready to use: every zero field takes its documented
// default, and a Policy is never written to by this package. A negative
// field is a configuration error: [Do] and [Transport.RoundTrip] then return
// an error wrapping [ErrInvalidPolicy] before any attempt. A Policy is a
// plain value; one may be shared by many goroutines as long as its functions
// are safe for concurrent use.
type Policy struct {
	// MaxAttempts is the number of calls to the function at most, the
	// first one included. Zero means DefaultMaxAttempts; 1 disables retries.
	MaxAttempts int

	// AttemptTimeout bounds one attempt; it is cut to the time left before
	// Deadline. For the Transport it runs until the response headers arrive:
	// reading the body is bounded by the caller's context only. Zero means
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration

	// Deadline bounds the whole call, attempts and sleeps included. Zero
	// means DefaultDeadline.
	Deadline time.Duration

	// Base and Cap shape the backoff: the delay after attempt n is drawn
	// from [0, min(Cap, Base*2^(n-1))] (see Backoff). Zero means DefaultBase
	// and DefaultCap.
	Base, Cap time.Duration

	// Retryable decides whether an attempt's error may pass on another try.
	// Nil means IsRetryable.
	Retryable func(error) bool

	// Clock measures the Deadline and dates Retry-After hints. Nil means the
	// real clock. Attempt timeouts always run in real time.
	Clock clockwork.Clock

	// Sleep waits d between attempts and returns ctx.Err() if ctx is done
	// first. Nil means waiting on Clock.
	Sleep func(ctx context.Context, d time.Duration) error

	// Rand returns the jitter factor, in [0, 1]; values outside are clamped
	// and NaN counts as 1. Nil means math/rand/v2.
	Rand func() float64

	// OnRetry is called once per retry, before the sleep, for logging and
	// metrics. It must not block for long. Nil means none; LogRetries
	// returns one that logs.
	OnRetry func(Event)

	// RetryAfterJitter adds up to this fraction of a server's Retry-After
	// hint, at random, when the hint sets the delay: 0.1 adds up to 10%.
	// Every client rate-limited at the same moment receives the same hint,
	// and would otherwise come back at the same instant. Zero means none, so
	// a hint is honoured exactly; negative or NaN is a configuration error.
	RetryAfterJitter float64

	// Budget, when set, caps retries at a share of the first attempts of
	// every call that shares it (see Budget): each call deposits on its
	// first attempt, and a retry that the budget refuses ends the call with
	// ReasonBudget. Nil means no budget.
	Budget *Budget

	// OnDone is called once when a call ends, however it ends, with its
	// Outcome, for metrics and traces; not for a call refused before any
	// attempt by a Policy with a negative field. It must not block for
	// long. Nil means none, and then nothing is measured.
	OnDone func(Outcome)

	// Hedge, when its Max is positive, sends a second copy of an attempt
	// that is slow to answer, and takes the first answer (see Hedge). The
	// zero Hedge sends none.
	Hedge Hedge
}

// Event describes one retry, for Policy.OnRetry.
type Event struct {
	Attempt int           // the attempt that just failed, counting from 1
	Err     error         // its error; a *StatusError for a retryable HTTP status
	Delay   time.Duration // the sleep about to happen

	// FromRetryAfter reports that Delay is the server's Retry-After hint
	// (plus RetryAfterJitter), which was longer than the backoff.
	FromRetryAfter bool

	// Context is the caller's context (never an attempt's), so that a hook
	// can reach the caller's trace span or logger.
	Context context.Context

	// Request is the Transport's request (the caller's, never an
	// attempt's copy); nil for Do. A hook must not modify it.
	Request *http.Request

	// Hedge reports a hedge (see Policy.Hedge), not a retry: a copy of
	// the attempt about to be sent while Attempt attempts are in flight or
	// failed. Delay is then the time waited since the last attempt was
	// sent, and Err the failure that sends it at once, or nil when the
	// delay has passed.
	Hedge bool
}

// Do calls fn until it succeeds, by the rules of p, and returns its result.
//
// Each call of fn gets a context that is done when the attempt's time is up
// (AttemptTimeout, cut to what is left of Deadline) or when ctx is done; fn
// must return soon after that context is done, since Do cannot stop it.
//
// Do returns fn's result on success. It returns fn's error unchanged when
// Policy.Retryable rejects it. It returns a [*Error] when the attempts or the
// time run out, wrapping the last error. When ctx is done it returns at once,
// without another attempt, an error for which errors.Is(err, ctx.Err())
// holds. A nil fn or a Policy with a negative field is an error, returned
// before any attempt. A nil ctx counts as context.Background().
//
// With Policy.Hedge, an attempt that has not returned after the hedge's
// delay is joined by another call of fn, concurrently: fn must be safe to
// run so. The first success wins; the others' contexts are cancelled and
// their results dropped.
func Do[T any](ctx context.Context, p Policy, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if fn == nil {
		return zero, errNilFunc
	}
	if ctx == nil {
		ctx = context.Background() // rather than a panic at the first ctx.Err()
	}
	var l loop
	if err := l.init(ctx, &p); err != nil {
		return zero, err
	}
	for {
		timeout, err := l.begin()
		if err != nil {
			return zero, l.done(nil, err)
		}
		var v T
		if p.Hedge.Max > 0 {
			v, err = hedgeDo(&l, timeout, fn)
		} else {
			var a attemptCtx
			a.start(ctx, l.attempt, l.began, timeout)
			v, err = fn(&a)
			a.release()
		}
		if err == nil {
			return v, l.done(nil, nil)
		}
		if err := l.failed(err, l.retryable(err)); err != nil {
			return zero, l.done(nil, err)
		}
	}
}

// loop is the state of one call's retries, shared by Do and Transport.
type loop struct {
	ctx     context.Context
	p       Policy    // a copy: the caller's is never written, nor kept
	start   time.Time // when the call began, by Policy.Clock or the real clock
	attempt int       // attempts begun
	last    error     // the last retryable error
	reason  Reason    // why retrying stopped without success, if it did
	slept   time.Duration
	paced   time.Duration // the Pacer's waits, in all
	hedges  int           // hedges sent
	waited  bool          // the call has waited since start: for a sleep, the Pacer or its store
	held    time.Duration // the Retry-After for which the Pacer holds the key, from the last response; 0: none
	drawn   time.Duration // held, jittered: one draw for the Pacer's hold and the sleep
	began   time.Time     // when the current attempt began by the real clock; zero with a Clock
	req     *http.Request // the Transport's request; nil for Do
}

func (l *loop) init(ctx context.Context, p *Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	l.ctx, l.p = ctx, *p
	l.start = l.p.now()
	if p.Budget != nil && ctx.Err() == nil {
		p.Budget.Deposit()
	}
	return nil
}

// room returns the time left to the call: to its Deadline, or to its
// context's deadline when that is sooner.
func (l *loop) room() time.Duration {
	room := l.p.deadline() - l.elapsed()
	if d, ok := l.ctx.Deadline(); ok {
		room = min(room, time.Until(d))
	}
	return room
}

// elapsed returns the time since the call began.
func (l *loop) elapsed() time.Duration { return l.p.since(l.start) }

// begin starts the next attempt (steps 2 and 3 of the loop): it returns the
// attempt's timeout, or the error to return when none may start.
// The attempt begins at l.began.
func (l *loop) begin() (time.Duration, error) {
	if err := l.ctx.Err(); err != nil {
		return 0, l.canceled(nil)
	}
	// The first attempt of a call that has not waited begins when the
	// call did: one reading of the clock serves both.
	now := l.start
	if l.attempt > 0 || l.waited {
		now = l.p.now()
	}
	remaining := l.p.deadline() - now.Sub(l.start)
	if remaining <= 0 {
		return 0, l.giveUp(ReasonDeadline)
	}
	l.attempt++
	l.began = time.Time{}
	if l.p.Clock == nil { // the attempt's own timeout is in real time
		l.began = now
	}
	return min(l.p.attemptTimeout(), remaining), nil
}

func (l *loop) retryable(err error) bool {
	if l.p.Retryable != nil {
		return l.p.Retryable(err)
	}
	return IsRetryable(err)
}

// failed takes an attempt's error (steps 4 to 8 of the loop). It returns
// nil after sleeping when another attempt may begin, or the error the call
// ends with. retry says whether the error may pass on another try.
func (l *loop) failed(err error, retry bool) error {
	if l.ctx.Err() != nil {
		return l.canceled(err)
	}
	if !retry {
		return err
	}
	l.last = err
	delay, hinted, err := l.delay()
	if err != nil {
		return err
	}
	return l.sleep(delay, hinted)
}

// delay computes the sleep before the next attempt (steps 5 to 7) and
// whether the server's hint set it, or the error to stop with.
func (l *loop) delay() (delay time.Duration, hinted bool, err error) {
	if l.attempt >= l.p.maxAttempts() {
		return 0, false, l.giveUp(ReasonMaxAttempts)
	}
	delay = Backoff(l.attempt, l.p.base(), l.p.cap(), l.p.Rand)
	if hint, ok := retryAfter(l.last); ok && hint > delay {
		delay, hinted = l.jitter(hint), true
	}
	room := l.room()
	if delay >= room {
		return 0, false, l.giveUp(ReasonDeadline)
	}
	room -= delay
	// Last, so that a retry the deadline forbids spends no token; a shared
	// Budget waits on its store only for the room the sleep leaves.
	if l.p.Budget != nil && !l.p.Budget.withdrawWithin(l.ctx, room) {
		if l.ctx.Err() != nil { // cancelled while the Budget's store was asked
			return 0, false, l.canceled(nil)
		}
		return 0, false, l.giveUp(ReasonBudget)
	}
	return delay, hinted, nil
}

// jitter returns hint with its jitter: the draw the Pacer's hold took,
// when the hint is the one it holds the key for, so that the two end
// together.
func (l *loop) jitter(hint time.Duration) time.Duration {
	if l.held > 0 && hint == l.held {
		return l.drawn
	}
	return l.p.jitterHint(hint)
}

// jitterHint adds up to RetryAfterJitter of hint, saturating rather than
// overflowing.
func (p *Policy) jitterHint(hint time.Duration) time.Duration {
	if p.RetryAfterJitter <= 0 {
		return hint
	}
	extra := float64(hint) * p.RetryAfterJitter * randFactor(p.Rand)
	if extra >= float64(wire.MaxDuration-hint) {
		return wire.MaxDuration
	}
	return hint + time.Duration(extra)
}

// sleep reports the retry and waits (step 8).
func (l *loop) sleep(delay time.Duration, hinted bool) error {
	if l.ctx.Err() != nil { // cancelled while the Transport drained a response
		return l.canceled(nil)
	}
	if l.p.OnRetry != nil {
		l.p.OnRetry(Event{Attempt: l.attempt, Err: l.last, Delay: delay, FromRetryAfter: hinted, Context: l.ctx, Request: l.req})
	}
	return l.pause(delay, false)
}

// pause waits d before the next attempt: a backoff sleep, or, when paced,
// a Pacer's wait. It returns the error the call ends with when the context
// ended meanwhile or a custom Sleep failed.
func (l *loop) pause(d time.Duration, paced bool) error {
	took, err := l.wait(d)
	if paced {
		l.paced += took
	} else {
		l.slept += took
	}
	switch {
	case l.ctx.Err() != nil:
		return l.canceled(nil)
	case err != nil && paced:
		return fmt.Errorf("retry: Policy.Sleep failed waiting for the Pacer after %d attempts: %w", l.attempt, err)
	case err != nil: // a custom Sleep failed on its own
		return fmt.Errorf("retry: Policy.Sleep failed after %d attempts: %w; last error: %w", l.attempt, err, l.last)
	}
	return nil
}

// wait waits d through Policy.Sleep, or on the Clock, and returns Sleep's
// error and how long the wait took by the Clock, measured only when OnDone
// will report it (else 0).
func (l *loop) wait(d time.Duration) (time.Duration, error) {
	l.waited = true
	var began time.Time
	if l.p.OnDone != nil {
		began = l.p.now()
	}
	var err error
	if l.p.Sleep != nil {
		err = l.p.Sleep(l.ctx, d)
	} else {
		err = sleepOn(l.ctx, l.p.Clock, d)
	}
	if l.p.OnDone == nil {
		return 0, err
	}
	return l.p.since(began), err
}

// await waits for a Pacer's turn (see Queued), at most room by the Clock,
// and counts the wait as the Pacer's.
func (l *loop) await(turn <-chan struct{}, room time.Duration) error {
	began := l.p.now()
	var expired <-chan time.Time
	if c := l.p.Clock; c != nil {
		t := c.NewTimer(room)
		defer t.Stop()
		expired = t.Chan()
	} else {
		t := time.NewTimer(room)
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-turn:
	case <-l.ctx.Done():
		err = l.canceled(nil)
	case <-expired:
		err = l.giveUp(ReasonDeadline)
	}
	l.paced += l.p.since(began)
	return err
}

func (l *loop) giveUp(r Reason) error {
	l.reason = r
	return &Error{Reason: r, Attempts: l.attempt, Err: l.last}
}

// canceled builds the error for a caller whose context is done: it satisfies
// errors.Is(err, ctx.Err()) and, when there is one, carries the attempt's
// error (or else the last retryable one) for errors.As.
func (l *loop) canceled(err error) error {
	cerr := l.ctx.Err()
	if err == nil {
		err = l.last
	}
	switch {
	case err == nil:
		return cerr
	case errors.Is(err, cerr):
		return err
	}
	return fmt.Errorf("retry: %w after %d attempts; last error: %w", cerr, l.attempt, err)
}

// sleepOn waits d on c (nil: the real clock) or until ctx is done.
func sleepOn(ctx context.Context, c clockwork.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if c == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Policy) validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: %s is %v; it must not be negative", ErrInvalidPolicy, field, v)
	}
	switch {
	case p.MaxAttempts < 0:
		return bad("MaxAttempts", p.MaxAttempts)
	case p.AttemptTimeout < 0:
		return bad("AttemptTimeout", p.AttemptTimeout)
	case p.Deadline < 0:
		return bad("Deadline", p.Deadline)
	case p.Base < 0:
		return bad("Base", p.Base)
	case p.Cap < 0:
		return bad("Cap", p.Cap)
	case p.RetryAfterJitter < 0 || math.IsNaN(p.RetryAfterJitter) || math.IsInf(p.RetryAfterJitter, 0):
		return fmt.Errorf("%w: RetryAfterJitter is %v; it must be a finite fraction, 0 or more",
			ErrInvalidPolicy, p.RetryAfterJitter)
	}
	if err := p.Hedge.validate(); err != nil {
		return err
	}
	return p.Budget.validate() // nil-safe
}

func (p *Policy) since(t time.Time) time.Duration {
	if p.Clock == nil {
		return time.Since(t)
	}
	return p.Clock.Since(t)
}

func (p *Policy) now() time.Time { return wire.Now(p.Clock) }

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

func (p *Policy) maxAttempts() int { return orDefault(p.MaxAttempts, DefaultMaxAttempts) }
func (p *Policy) attemptTimeout() time.Duration {
	return orDefault(p.AttemptTimeout, DefaultAttemptTimeout)
}
func (p *Policy) deadline() time.Duration { return orDefault(p.Deadline, DefaultDeadline) }
func (p *Policy) base() time.Duration     { return orDefault(p.Base, DefaultBase) }
func (p *Policy) cap() time.Duration      { return orDefault(p.Cap, DefaultCap) }
