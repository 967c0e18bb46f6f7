package main

import (
	"context"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// objectBody is what the store answers every GET with.
const objectBody = `{"object":"simulated","size":64}`

// counts are what both servers count: the attempts they received, and the
// response bodies they handed out that are not yet closed.
type counts struct {
	attempts atomic.Int64
	open     atomic.Int64
}

// Attempts returns the attempts received so far.
func (c *counts) Attempts() int { return int(c.attempts.Load()) }

// Open returns the response bodies handed out and not yet closed.
func (c *counts) Open() int { return int(c.open.Load()) }

// respond returns a 200 for req whose body counts as open until closed.
func (c *counts) respond(req *http.Request) *http.Response {
	c.open.Add(1)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: h,
		Body: &countedBody{r: strings.NewReader(objectBody), open: &c.open}, ContentLength: int64(len(objectBody)),
		Request: req, ProtoMajor: 1, ProtoMinor: 1}
}

// countedBody is a response body that stops counting as open when first
// closed.
type countedBody struct {
	r      *strings.Reader
	open   *atomic.Int64
	closed atomic.Bool
}

func (b *countedBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *countedBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.open.Add(-1)
	}
	return nil
}

// Store is an in-memory object store whose time to response headers
// follows a Model, whatever the load: it serves any number of requests at
// once. Each attempt's time is drawn from a PCG seeded with the store's
// seed and the attempt's place among the attempts at the same path (the
// first, the second, ...), so that a run does not depend on the order in
// which goroutines that wake at the same instant are scheduled. An
// attempt whose context ends before its time is up returns the context's
// error, and nothing is left running.
//
// It is an http.RoundTripper, used as a Transport's Base: no network. It
// waits on the time package, so under testing/synctest its waits take no
// real time. A Store is safe for concurrent use by multiple goroutines;
// NewStore makes one.
type Store struct {
	counts
	model Model
	seed  uint64

	mu   sync.Mutex     // protects seen
	seen map[string]int // attempts received per path
}

// NewStore returns a store whose times follow m, drawn with seed.
func NewStore(m Model, seed uint64) *Store {
	return &Store{model: m, seed: seed, seen: make(map[string]int)}
}

// RoundTrip waits the attempt's drawn time, or until its context ends, and
// answers 200.
func (s *Store) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody(req)
	s.attempts.Add(1)
	s.mu.Lock()
	r := draws(s.seed, req.URL.Path, s.seen)
	s.mu.Unlock()
	d := s.model.Draw(r)
	if err := sleep(req.Context(), d); err != nil {
		return nil, err
	}
	return s.respond(req), nil
}

// Queue is an in-memory server that serves C requests at a time and
// queues the others, first come first served. Each request takes a
// service time drawn uniformly from Service × [1-Spread, 1+Spread], with
// a PCG seeded as the Store's, so that no two answers fall on the same
// instant, as they would all the time in virtual time. Its time to
// headers is the wait in the queue plus the service: slowness that comes
// from load alone.
//
// Like many servers, it does not notice a client that has gone until it
// writes the answer: an attempt whose context ends returns the context's
// error at once, but the request stays in the queue and is served all the
// same, taking its place and its service time from the others.
//
// It is an http.RoundTripper, used as a Transport's Base, that waits on
// the time package. A Queue is safe for concurrent use by multiple
// goroutines; NewQueue makes one.
type Queue struct {
	counts
	c       int
	service time.Duration
	spread  float64
	seed    uint64

	mu        sync.Mutex // protects the fields below
	busy      int
	waiting   []job          // first come first
	seen      map[string]int // attempts received per path
	abandoned int            // requests whose client had gone before their answer
}

// job is a request in the Queue.
type job struct {
	service time.Duration
	done    chan struct{} // closed when its service ends
}

// NewQueue returns a server that serves c requests at a time, each for
// service × [1-spread, 1+spread], drawn with seed.
func NewQueue(c int, service time.Duration, spread float64, seed uint64) *Queue {
	return &Queue{c: c, service: service, spread: spread, seed: seed, seen: make(map[string]int)}
}

// RoundTrip queues req, and answers 200 once it has been served.
func (q *Queue) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody(req)
	q.attempts.Add(1)
	q.mu.Lock()
	r := draws(q.seed, req.URL.Path, q.seen)
	j := job{service: time.Duration(float64(q.service) * (1 + q.spread*(2*r.Float64()-1))), done: make(chan struct{})}
	if q.busy < q.c {
		q.busy++
		q.serve(j)
	} else {
		q.waiting = append(q.waiting, j)
	}
	q.mu.Unlock()
	select {
	case <-j.done:
		return q.respond(req), nil
	case <-req.Context().Done():
		q.mu.Lock()
		q.abandoned++
		q.mu.Unlock()
		return nil, req.Context().Err()
	}
}

// serve puts j in service, and when its time has passed closes its done
// and serves the next in the queue. q.mu must be held.
func (q *Queue) serve(j job) {
	time.AfterFunc(j.service, func() {
		close(j.done)
		q.mu.Lock()
		defer q.mu.Unlock()
		if len(q.waiting) == 0 {
			q.busy--
			return
		}
		next := q.waiting[0]
		q.waiting = q.waiting[1:]
		q.serve(next)
	})
}

// Abandoned returns how many requests' clients had gone before their
// answer: requests served, or still to be served, for nobody.
func (q *Queue) Abandoned() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.abandoned
}

// draws returns the source of an attempt's draws: a PCG seeded with seed
// and the attempt's place among the attempts at path, which it counts in
// seen. The caller must hold the lock that protects seen.
func draws(seed uint64, path string, seen map[string]int) *rand.Rand {
	nth := seen[path]
	seen[path]++
	h := fnv.New64a()
	_, _ = io.WriteString(h, path)
	return rand.New(rand.NewPCG(seed+uint64(nth), h.Sum64()))
}

// closeBody reads and closes a request's body, as the RoundTripper
// contract asks of the base.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
