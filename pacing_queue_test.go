package retry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
)

// slotPacer is a Pacer of a fixed number of requests in flight: what it
// takes to plug a concurrency limit into a Transport. Its Reservations
// wait their turn through retry.Queued.
type slotPacer struct {
	est time.Duration // the wait each turn is expected to take

	mu       sync.Mutex
	free     int
	queue    []*slot
	cancels  int
	readies  int
	received []int // the attempts that got a slot, in order
}

type slot struct {
	p       *slotPacer
	attempt int
	held    bool
	turn    chan struct{}
}

func (p *slotPacer) Reserve(_ *http.Request, attempt int, _ clockwork.Clock, _ time.Duration) (retry.Reservation, time.Duration) {
	return &slot{p: p, attempt: attempt}, 0
}

func (s *slot) Turn(clockwork.Clock, time.Duration) (<-chan struct{}, time.Duration) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.held {
		return nil, 0
	}
	if p.free > 0 && len(p.queue) == 0 {
		p.free--
		s.held = true
		return nil, 0
	}
	s.turn = make(chan struct{})
	p.queue = append(p.queue, s)
	return s.turn, p.est
}

func (s *slot) Ready(clockwork.Clock, time.Duration, bool) time.Duration {
	s.p.mu.Lock()
	s.p.readies++
	s.p.mu.Unlock()
	return 0
}

func (s *slot) Cancel() {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancels++
	for i, w := range p.queue {
		if w == s {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
		}
	}
	if s.held {
		p.handOn()
	}
}

func (s *slot) Done(*http.Request, *http.Response, error, clockwork.Clock, time.Duration, time.Duration) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.received = append(p.received, s.attempt)
	p.handOn()
}

// handOn gives a freed slot to the first waiter; p.mu is held.
func (p *slotPacer) handOn() {
	if len(p.queue) == 0 {
		p.free++
		return
	}
	w := p.queue[0]
	p.queue = p.queue[1:]
	w.held = true
	close(w.turn)
}

func (p *slotPacer) waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// TestTransportWaitsForATurn: a Reservation that implements Queued makes
// the attempt wait for its turn, not by Sleep; the wait counts as the
// Pacer's in Outcome.Waited; a cancelled wait ends the call with the
// context's error, one past the Deadline with ReasonDeadline, and one
// expected to outlast the call ends it at once. Each gives its place back.
func TestTransportWaitsForATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pacer := &slotPacer{free: 1, est: time.Second}
		gate := make(chan struct{})
		var sent atomic.Int64
		base := roundTripper(func(req *http.Request) (*http.Response, error) {
			if sent.Add(1) == 1 {
				<-gate
			}
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
		})
		var slept atomic.Int64
		var mu sync.Mutex
		var waited []time.Duration
		policy := retry.Policy{Deadline: time.Minute,
			Sleep: func(context.Context, time.Duration) error { slept.Add(1); return nil },
			OnDone: func(o retry.Outcome) {
				mu.Lock()
				waited = append(waited, o.Waited)
				mu.Unlock()
			}}
		tr := &retry.Transport{Base: base, Policy: policy, Pacer: pacer}
		call := func(tr *retry.Transport, ctx context.Context) error {
			req := httptest.NewRequest(http.MethodGet, "http://api.example/", nil).WithContext(ctx)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		first := make(chan error, 1)
		go func() { first <- call(tr, context.Background()) }()
		synctest.Wait()

		ctx, cancel := context.WithCancel(context.Background())
		cancelled := make(chan error, 1)
		go func() { cancelled <- call(tr, ctx) }()
		synctest.Wait()
		if n := pacer.waiting(); n != 1 {
			t.Fatalf("%d attempts wait for a turn, want 1", n)
		}
		cancel()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled wait returned %v, want context.Canceled", err)
		}

		short := &retry.Transport{Base: base, Policy: retry.Policy{Deadline: 5 * time.Second}, Pacer: pacer}
		began := time.Now()
		err := call(short, context.Background())
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || time.Since(began) != 5*time.Second {
			t.Errorf("a wait past the Deadline returned %v after %v, want ReasonDeadline after 5s", err, time.Since(began))
		}

		pacer.est = time.Hour // no turn can come in time
		began = time.Now()
		err = call(short, context.Background())
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || time.Since(began) != 0 {
			t.Errorf("a wait expected past the Deadline returned %v after %v, want ReasonDeadline at once", err, time.Since(began))
		}
		pacer.est = time.Second

		waiter := make(chan error, 1)
		go func() { waiter <- call(tr, context.Background()) }()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		close(gate)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-waiter; err != nil {
			t.Fatal(err)
		}

		if n := slept.Load(); n != 0 {
			t.Errorf("Policy.Sleep called %d times, want none: a turn is not a sleep", n)
		}
		pacer.mu.Lock()
		defer pacer.mu.Unlock()
		if pacer.cancels != 3 {
			t.Errorf("%d places given back, want 3 (cancel, Deadline, expected past it)", pacer.cancels)
		}
		if pacer.free != 1 || len(pacer.queue) != 0 {
			t.Errorf("%d slots free and %d waiting at the end, want 1 and 0", pacer.free, len(pacer.queue))
		}
		if pacer.readies == 0 {
			t.Error("Ready never called after a turn came, want it asked again")
		}
		mu.Lock()
		defer mu.Unlock()
		var most time.Duration
		for _, w := range waited {
			most = max(most, w)
		}
		if most != 2*time.Second {
			t.Errorf("outcomes waited %v, want one of 2s, the wait for the turn", waited)
		}
	})
}
