package retry

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Hedge says whether, and when, a call sends a second copy of an attempt
// that is slow to answer: a hedge. The first answer wins; the others are
// cancelled. A hedge cures a tail of latency that is not caused by load
// (one slow replica, a pause, a cold cache) for cheap reads that may run
// twice; it makes things worse when slowness is load, and doubles the cost
// of calls that cost per attempt, such as LLM generation. The zero Hedge
// sends none.
//
// A Transport hedges only requests it may send twice after a failure that
// may have been processed (idempotent methods, an idempotency key,
// Replayable), whose body has GetBody or none, when it has no Pacer; each
// hedge has a fresh body from GetBody and the same headers, idempotency
// key included. [Do] hedges fn when its Policy says so: fn then runs
// concurrently with itself.
//
// Hedges count against MaxAttempts, the Deadline and the Budget: a hedge
// is an attempt, withdrawn from the Budget as a retry is; a Budget that
// refuses stops new hedges, never one in flight. A retryable failure of
// one attempt sends the next hedge at once, unless it carries a
// Retry-After; a failure ends the exchange only when no attempt is left in
// flight, and then the loop judges it as it would any attempt's. Hedges
// are reported to Policy.OnRetry (Event.Hedge) and counted in
// Outcome.Hedges.
type Hedge struct {
	// Max is how many hedges a call may send at most; zero means none.
	Max int

	// Delay is the wait, from the last attempt sent, before a hedge is
	// sent. With Adaptive, it serves until Adaptive has learned a delay;
	// zero then means no hedge until it has. Without Adaptive it must be
	// positive when Max is.
	Delay time.Duration

	// Adaptive, when set, learns the delay from the time to response
	// headers (for Do, to fn's return) of recent attempts. Share one among
	// the calls whose latencies are alike: a Transport keeps one memory
	// per host in it.
	Adaptive *HedgeDelay
}

// HedgeDelay learns a hedge's delay: a quantile of the time recent
// attempts took to answer, per host, between a floor and a cap. An attempt
// cancelled because another answered first counts with the time it had
// taken then, which is less than it would have taken: the quantile sees
// only that it was slower than the delay. It remembers the last 256
// attempts of each of up to 256 hosts (more hosts share one memory), and
// learns once it has 32. Its zero value is ready to use; it is safe for
// concurrent use and must not be copied after first use.
type HedgeDelay struct {
	// Quantile of the recent times to answer that the delay is, in (0, 1).
	// Zero means 0.95: about one call in twenty is hedged.
	Quantile float64

	// Min and Max bound the learned delay. Zero means 1 ms and 1 s.
	Min, Max time.Duration

	mu    sync.Mutex // guards hosts
	hosts map[string]*latencies
}

// The memory of a HedgeDelay.
const (
	hedgeOutcomes = 64  // hedged calls remembered, about
	hedgeMinWins  = 0.1 // below this share of hedges that win, hedges are probes only
	hedgeProbe    = 20  // then one hedge in this many is sent

	hedgeSamples = 256 // kept per host
	hedgeLearn   = 32  // needed before a delay is learned; also how often it is learned again
	hedgeHosts   = 256 // hosts with a memory of their own
)

// latencies is one host's memory of times to answer.
type latencies struct {
	mu    sync.Mutex
	ring  [hedgeSamples]time.Duration
	n     int          // samples recorded in all
	delay atomic.Int64 // the last quantile learned; 0 until then

	// Whether hedges have been winning: counts of recent hedged calls,
	// halved whenever they reach hedgeOutcomes, and of those a hedge won.
	hedged, won float64
	skipped     int // hedges not sent since the last, while hedges lose
}

func (d *HedgeDelay) validate() error {
	switch {
	case d == nil:
		return nil
	case d.Quantile < 0 || d.Quantile >= 1 || math.IsNaN(d.Quantile):
		return fmt.Errorf("%w: Hedge.Adaptive.Quantile is %v; it must be in (0, 1), or 0", ErrInvalidPolicy, d.Quantile)
	case d.Min < 0 || d.Max < 0:
		return fmt.Errorf("%w: Hedge.Adaptive.Min and Max must not be negative", ErrInvalidPolicy)
	case d.Max > 0 && d.Min > d.Max:
		return fmt.Errorf("%w: Hedge.Adaptive.Min is %v, above Max %v", ErrInvalidPolicy, d.Min, d.Max)
	}
	return nil
}

func (h *Hedge) validate() error {
	switch {
	case h.Max < 0:
		return fmt.Errorf("%w: Hedge.Max is %d; it must not be negative", ErrInvalidPolicy, h.Max)
	case h.Delay < 0:
		return fmt.Errorf("%w: Hedge.Delay is %v; it must not be negative", ErrInvalidPolicy, h.Delay)
	case h.Max > 0 && h.Delay == 0 && h.Adaptive == nil:
		return fmt.Errorf("%w: Hedge.Max is %d with neither Delay nor Adaptive: say when to hedge", ErrInvalidPolicy, h.Max)
	}
	return h.Adaptive.validate()
}

// delay returns the wait before a hedge of a request to host; zero or
// less means none until a failure.
func (h *Hedge) delay(host string) time.Duration {
	if d := h.Adaptive; d != nil {
		if l := d.memory(host, false); l != nil {
			if v := time.Duration(l.delay.Load()); v > 0 {
				return v
			}
		}
	}
	return h.Delay
}

// memory returns host's memory, creating it when add is set.
func (d *HedgeDelay) memory(host string, add bool) *latencies {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.hosts[host]
	if l == nil && add {
		if d.hosts == nil {
			d.hosts = make(map[string]*latencies)
		}
		if len(d.hosts) >= hedgeHosts {
			host = "" // the hosts beyond share one memory
			if l = d.hosts[host]; l != nil {
				return l
			}
		}
		l = new(latencies)
		d.hosts[host] = l
	}
	return l
}

// allow reports whether a hedge of a request to host may go after its
// delay. While recent hedges have rarely won (under hedgeMinWins of at
// least 20), one in hedgeProbe goes: on a server where every attempt is
// slow because it is loaded, a hedge queues behind its original, adds to
// the load and never wins; the probes find out when that has changed.
func (d *HedgeDelay) allow(host string) bool {
	l := d.memory(host, true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hedged < 20 || l.won >= hedgeMinWins*l.hedged {
		return true
	}
	l.skipped++
	if l.skipped < hedgeProbe {
		return false
	}
	l.skipped = 0
	return true
}

// outcome remembers whether the hedges of a call to host won.
func (d *HedgeDelay) outcome(host string, won bool) {
	l := d.memory(host, true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hedged >= hedgeOutcomes {
		l.hedged, l.won = l.hedged/2, l.won/2
	}
	l.hedged++
	if won {
		l.won++
	}
}

// record remembers that an attempt to host took took to answer, and
// learns the delay anew every hedgeLearn samples.
func (d *HedgeDelay) record(host string, took time.Duration) {
	l := d.memory(host, true)
	l.mu.Lock()
	l.ring[l.n%hedgeSamples] = took
	l.n++
	if l.n%hedgeLearn != 0 {
		l.mu.Unlock()
		return
	}
	s := slices.Clone(l.ring[:min(l.n, hedgeSamples)])
	l.mu.Unlock()
	slices.Sort(s)
	q := d.Quantile
	if q == 0 {
		q = 0.95
	}
	v := s[min(int(q*float64(len(s))), len(s)-1)]
	lo, hi := orDefault(d.Min, time.Millisecond), orDefault(d.Max, time.Second)
	l.delay.Store(int64(max(lo, min(v, hi))))
}

// hedgeable reports whether the Transport may hedge this call.
func (c *call) hedgeable() bool {
	b := c.req.Body
	return c.l.p.Hedge.Max > 0 && c.t.Pacer == nil && c.replay && c.rb == nil &&
		(b == nil || b == http.NoBody || c.req.GetBody != nil)
}

// racer is what one attempt of a hedged exchange got.
type racer struct {
	id       int // its place in the order of launch
	resp     *http.Response
	err      error
	cancel   context.CancelFunc // ends its context: a loser's at once, the winner's when its body is closed
	timer    *time.Timer        // a hedge's own attempt timeout, stopped at its answer; nil for the first
	timedOut *atomic.Bool       // the timer fired
	began    time.Time
	took     time.Duration // to its answer
}

// race is a hedged exchange: its attempts, and the answers they send.
type race struct {
	mu      sync.Mutex // guards over and the send on answers
	over    bool       // the exchange has ended: later answers are closed by their racers
	answers chan racer // buffered for every attempt: a racer never blocks
	running []*racer   // the attempts in flight, for the cancel of the losers
}

// send hands a racer's answer to the exchange, or closes it when the
// exchange has ended.
func (r *race) send(a racer) {
	r.mu.Lock()
	if !r.over {
		r.answers <- a
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	drop(a)
}

// end ends the exchange: the racers still in flight are cancelled, and the
// answers already sent but not taken are closed.
func (r *race) end() {
	r.mu.Lock()
	r.over = true
	r.mu.Unlock()
	for _, a := range r.running {
		a.cancel()
	}
	for {
		select {
		case a := <-r.answers:
			drop(a)
		default:
			return
		}
	}
}

// drop cancels a losing attempt and closes its response, if any. The body
// is not drained: its connection is not worth the wait.
func drop(a racer) {
	a.cancel()
	if a.resp != nil && a.resp.Body != nil {
		_ = a.resp.Body.Close()
	}
}

// hedgedBody is the winning response's body: its attempt's context lives
// until the body is closed, so that the body is never cut.
type hedgedBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *hedgedBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// hedge sends areq, and hedges of it, and returns the first answer that is
// not a retryable failure, or, when every attempt has failed, the last
// failure.
func (c *call) hedge(areq *http.Request) (*http.Response, error) {
	l := &c.l
	h := &l.p.Hedge
	host := areq.URL.Host
	delay := h.delay(host)
	r := &race{answers: make(chan racer, l.p.maxAttempts()+1)}
	base := c.base
	launched := 0
	launch := func(req *http.Request, a *racer) {
		a.id, a.began = launched, time.Now()
		launched++
		r.running = append(r.running, a)
		go func(a racer) {
			a.resp, a.err = base.RoundTrip(req)
			if a.timer != nil {
				a.timer.Stop() // the attempt timeout ends at the headers
				if a.err != nil && a.timedOut.Load() {
					a.err = &attemptTimeoutError{a.err}
				}
			}
			if a.err == nil && a.resp == nil {
				a.err = errNilResponse
			}
			a.took = time.Since(a.began)
			r.send(a)
		}(*a)
	}
	ctx, cancel := context.WithCancel(areq.Context())
	launch(areq.WithContext(ctx), &racer{cancel: cancel})
	inflight, hedges, stopped := 1, 0, false
	timer, tick := newHedgeTimer(delay)
	defer timer.stop()
	// next sends a hedge, if one may go: err is the failure that sends it
	// at once, nil when the delay has passed.
	next := func(err error, waited time.Duration) bool {
		if hedges >= h.Max || stopped || areq.Context().Err() != nil {
			return false
		}
		if err == nil && h.Adaptive != nil && !h.Adaptive.allow(host) {
			return false // hedges have been losing: this one is not sent, the next may be
		}
		var hreq *http.Request
		var ha *racer
		ok := l.mayHedge(err, waited, func() (ok bool) {
			hreq, ha, ok = c.hedgeRequest(areq, l.attempt+1)
			return ok
		})
		if !ok {
			if ha != nil { // made ready, then refused by the Budget
				ha.timer.Stop()
				ha.cancel()
				closeBody(hreq.Body)
			}
			stopped = true
			return false
		}
		hedges++
		inflight++
		launch(hreq, ha)
		return true
	}
	var last *racer
	for {
		select {
		case a := <-r.answers:
			inflight--
			r.forget(a.id)
			if !c.hedgeFailed(&a) {
				r.end()
				c.learnLatency(host, &a, r, delay, hedges)
				wrapHedged(&a)
				if last != nil {
					drop(*last)
				}
				return a.resp, nil
			}
			if last != nil {
				drop(*last)
			}
			last = &a
			if (a.resp == nil || !hasRetryAfter(a.resp.Header)) && next(failure(&a), 0) {
				timer.reset(delay)
			}
			if inflight == 0 {
				r.end()
				if d := h.Adaptive; d != nil && hedges > 0 {
					d.outcome(host, false)
				}
				wrapHedged(last)
				return last.resp, last.err
			}
		case <-tick:
			if next(nil, delay) {
				timer.reset(delay)
			}
		}
	}
}

// mayHedge reports whether a hedge may be sent now, and if so counts it as
// an attempt and reports it to OnRetry: err is the failure that sends it at
// once, nil when the delay, waited, has passed. prepare makes the hedge
// ready, and reports false when it cannot be.
func (l *loop) mayHedge(err error, waited time.Duration, prepare func() bool) bool {
	if l.attempt >= l.p.maxAttempts() || l.ctx.Err() != nil {
		return false
	}
	room := l.room()
	if room <= 0 || !prepare() {
		return false
	}
	if b := l.p.Budget; b != nil && !b.withdrawWithin(l.ctx, min(room, hedgeBudgetWait)) {
		return false // the Budget stops new hedges, never one in flight
	}
	if f := l.p.OnRetry; f != nil {
		f(Event{Attempt: l.attempt, Err: err, Delay: waited, Hedge: true, Context: l.ctx, Request: l.req})
	}
	l.attempt++
	l.hedges++
	return true
}

// hedgeDo runs fn as attempt l.attempt of Do, hedged by l's Policy, with
// timeout, and returns the first success, or the last failure when every
// attempt has failed. The losers' contexts are cancelled; their results
// are dropped.
func hedgeDo[T any](l *loop, timeout time.Duration, fn func(ctx context.Context) (T, error)) (T, error) {
	h := &l.p.Hedge
	delay := h.delay("")
	type answer struct {
		id   int
		v    T
		err  error
		took time.Duration
	}
	answers := make(chan answer, l.p.maxAttempts()+1) // buffered for every attempt: a loser never blocks
	var running []*attemptCtx                         // by id; nil once answered
	began := make([]time.Time, 0, 2)
	launch := func(timeout time.Duration) {
		a := new(attemptCtx)
		a.start(l.ctx, l.attempt, time.Time{}, timeout)
		id, start := len(running), time.Now()
		running = append(running, a)
		began = append(began, start)
		go func() {
			v, err := fn(a)
			answers <- answer{id, v, err, time.Since(start)}
		}()
	}
	end := func() {
		for _, a := range running {
			if a != nil {
				a.release()
			}
		}
	}
	launch(timeout)
	inflight, hedges := 1, 0
	timer, tick := newHedgeTimer(delay)
	defer timer.stop()
	next := func(err error, waited time.Duration) bool {
		if hedges >= h.Max {
			return false
		}
		if err == nil && h.Adaptive != nil && !h.Adaptive.allow("") {
			return false // hedges have been losing: this one is not sent, the next may be
		}
		var t time.Duration
		if !l.mayHedge(err, waited, func() bool {
			t = min(l.p.attemptTimeout(), l.room())
			return t > 0
		}) {
			hedges = h.Max
			return false
		}
		hedges++
		inflight++
		launch(t)
		return true
	}
	var zero T
	var last error
	for {
		select {
		case a := <-answers:
			inflight--
			running[a.id].release()
			running[a.id] = nil
			if a.err == nil {
				end()
				if d := h.Adaptive; d != nil {
					d.record("", a.took)
					now := time.Now()
					for id, r := range running {
						if took := now.Sub(began[id]); r != nil && took >= delay {
							d.record("", took)
						}
					}
					if hedges > 0 {
						d.outcome("", a.id > 0)
					}
				}
				return a.v, nil
			}
			last = a.err
			if l.retryable(a.err) && next(a.err, 0) {
				timer.reset(delay)
			}
			if inflight == 0 {
				end()
				if d := h.Adaptive; d != nil && hedges > 0 {
					d.outcome("", false)
				}
				return zero, last
			}
		case <-tick:
			if next(nil, delay) {
				timer.reset(delay)
			}
		}
	}
}

// hedgeBudgetWait bounds the wait for a Budget's store before a hedge: a
// hedge late by more is worth less.
const hedgeBudgetWait = 50 * time.Millisecond

// forget takes the racer id, which has answered, out of the running.
func (r *race) forget(id int) {
	r.running = slices.DeleteFunc(r.running, func(a *racer) bool { return a.id == id })
}

// hedgeFailed reports an answer that does not end the exchange: an error,
// or a status the status rules retry.
func (c *call) hedgeFailed(a *racer) bool {
	if a.err != nil {
		return true
	}
	se := StatusError{StatusCode: a.resp.StatusCode, Response: a.resp}
	return a.resp.StatusCode >= 400 && se.retryable()
}

// failure is the error an answer that failed stands for, for OnRetry.
func failure(a *racer) error {
	if a.err != nil {
		return a.err
	}
	return &StatusError{StatusCode: a.resp.StatusCode, Message: statusMessage(a.resp.StatusCode), Response: a.resp}
}

// wrapHedged makes a's response keep its attempt's context until its body
// is closed; an answer without a body ends it now.
func wrapHedged(a *racer) {
	if a.resp == nil || a.resp.Body == nil || a.resp.Body == http.NoBody {
		a.cancel()
		return
	}
	a.resp.Body = &hedgedBody{ReadCloser: a.resp.Body, cancel: a.cancel}
}

// learnLatency teaches the adaptive delay the winner's time to answer, the
// time the losers had taken when they were cancelled (when it is past the
// delay, which is all the quantile needs of them), and whether a hedge won.
func (c *call) learnLatency(host string, winner *racer, r *race, delay time.Duration, hedges int) {
	d := c.l.p.Hedge.Adaptive
	if d == nil {
		return
	}
	d.record(host, winner.took)
	now := time.Now()
	for _, a := range r.running {
		if took := now.Sub(a.began); took >= delay {
			d.record(host, took)
		}
	}
	if hedges > 0 {
		d.outcome(host, winner.id > 0)
	}
}

// hedgeRequest returns a copy of areq for attempt n, with a fresh body
// and a context of its own: under the call's, not the first attempt's,
// with an attempt timeout of its own that ends at its answer.
func (c *call) hedgeRequest(areq *http.Request, n int) (*http.Request, *racer, bool) {
	ctx, cancel := context.WithCancel(context.WithValue(c.ctx, attemptKey{}, n))
	req := areq.Clone(ctx) // the header too: a base may write to it
	if b := c.req.Body; b != nil && b != http.NoBody {
		body, err := c.req.GetBody()
		if err != nil {
			cancel()
			return nil, nil, false
		}
		req.Body = body
	}
	a := &racer{cancel: cancel, timedOut: new(atomic.Bool)}
	timeout := min(c.l.p.attemptTimeout(), c.l.room())
	a.timer = time.AfterFunc(timeout, func() { a.timedOut.Store(true); cancel() })
	return req, a, true
}

// hedgeTimer is the timer of a hedge's delay, or none when the delay is not
// positive.
type hedgeTimer struct{ t *time.Timer }

func newHedgeTimer(d time.Duration) (hedgeTimer, <-chan time.Time) {
	if d <= 0 {
		return hedgeTimer{}, nil
	}
	t := time.NewTimer(d)
	return hedgeTimer{t}, t.C
}

func (t hedgeTimer) reset(d time.Duration) {
	if t.t != nil {
		t.t.Reset(d)
	}
}

func (t hedgeTimer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
}
