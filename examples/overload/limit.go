package main

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
)

// Oracle is a semaphore that knows what no client can: its size is the
// server's true C at every moment. It sits under the retry.Transport, as
// its Base, and lets an attempt through to the server only while fewer
// than C attempts it let through are unanswered; the others wait their
// turn, first come first served. It is the schedule the strategies are
// measured against: the server is kept full and never refuses.
//
// An Oracle is safe for concurrent use by multiple goroutines; NewOracle
// makes one.
type Oracle struct {
	srv  *Server
	next http.RoundTripper

	mu    sync.Mutex // protects the fields below
	inUse int
	queue []chan struct{} // the waiters, first come first; closed when granted
}

// NewOracle returns the semaphore in front of srv.
func NewOracle(srv *Server) *Oracle { return &Oracle{srv: srv, next: srv} }

// RoundTrip waits for a place, bounded by req's context, sends req to the
// server and gives the place back when the response headers arrive.
func (o *Oracle) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := o.acquire(req.Context()); err != nil {
		closeBody(req)
		return nil, err
	}
	defer o.release()
	return o.next.RoundTrip(req)
}

func (o *Oracle) acquire(ctx context.Context) error {
	o.mu.Lock()
	if len(o.queue) == 0 && o.inUse < o.srv.Capacity(time.Now()) {
		o.inUse++
		o.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	o.queue = append(o.queue, ch)
	o.mu.Unlock()
	for {
		// Besides a release, a rise of C lets waiters in: wake at the next
		// change to look.
		change, stop := o.nextChange()
		select {
		case <-ch:
			stop()
			return nil
		case <-change:
			o.grant()
		case <-ctx.Done():
			stop()
			return o.leave(ch, ctx.Err())
		}
	}
}

// nextChange returns a channel that receives at the server's next change
// of C (nil when there is none) and a function that stops its timer.
func (o *Oracle) nextChange() (<-chan time.Time, func()) {
	d, ok := o.srv.untilChange(time.Now())
	if !ok {
		return nil, func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// leave takes the waiter ch out of the queue after its context ended, or
// gives its place back if it was granted meanwhile, and returns err.
func (o *Oracle) leave(ch chan struct{}, err error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := slices.Index(o.queue, ch); i >= 0 {
		o.queue = slices.Delete(o.queue, i, i+1)
		return err
	}
	o.inUse--
	o.grantLocked()
	return err
}

func (o *Oracle) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inUse--
	o.grantLocked()
}

func (o *Oracle) grant() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.grantLocked()
}

// grantLocked lets in the first waiters while there is room under C. o.mu
// must be held.
func (o *Oracle) grantLocked() {
	c := o.srv.Capacity(time.Now())
	for len(o.queue) > 0 && o.inUse < c {
		close(o.queue[0])
		o.queue = o.queue[1:]
		o.inUse++
	}
}

// Adaptive runs each attempt through failsafe-go's adaptive concurrency
// limiter, with the limiter's defaults, as a RoundTripper under the
// retry.Transport: an attempt waits for a permit (bounded by its context),
// and the permit goes back, with the attempt's duration recorded, when the
// response headers arrive.
//
// Every response is recorded, 529s and 503s as much as 200s, as failsafe-go
// does when the limiter is a policy of failsafehttp's RoundTripper: the
// limiter is result-agnostic, and takes its only signal, overload
// included, from how long executions take. A permit is dropped unrecorded,
// again as failsafe-go does, only when the attempt's context ended.
//
// An Adaptive is safe for concurrent use by multiple goroutines;
// NewAdaptive makes one.
type Adaptive struct {
	lim  adaptivelimiter.AdaptiveLimiter[*http.Response]
	next http.RoundTripper
}

// NewAdaptive returns a limiter with failsafe-go's defaults in front of
// next: limits of 1 to 200 starting at 20, a limit at most 5 times the
// executions in flight, and no queue of its own beyond the blocking
// acquire.
func NewAdaptive(next http.RoundTripper) *Adaptive {
	return &Adaptive{lim: adaptivelimiter.NewWithDefaults[*http.Response](), next: next}
}

// RoundTrip waits for a permit, sends req and records the outcome.
func (a *Adaptive) RoundTrip(req *http.Request) (*http.Response, error) {
	permit, err := a.lim.AcquirePermit(req.Context())
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := a.next.RoundTrip(req)
	if req.Context().Err() != nil {
		permit.Drop()
	} else {
		permit.Record()
	}
	return resp, err
}

// Limit returns the limiter's current concurrency limit.
func (a *Adaptive) Limit() int { return a.lim.Limit() }

// closeBody closes the body of a request that will not be sent, as the
// RoundTripper contract asks.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
