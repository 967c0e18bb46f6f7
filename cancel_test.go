package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// cancelCase cancels one call at a random moment of one phase.
type cancelCase struct {
	api    string        // "Do" or "Transport"
	phase  string        // "attempt", "drain" (Transport only) or "sleep"
	at     int           // the attempt during or after which the cancel comes
	offset time.Duration // after the phase began
}

// cancelRun is what one cancelled call did.
type cancelRun struct {
	mu       sync.Mutex
	cancelAt time.Time   // just before cancel was called; zero if it was not
	starts   []time.Time // each attempt's start
}

func (r *cancelRun) start() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, time.Now())
	return len(r.starts)
}

// cancelAfter cancels after d and records when.
func (r *cancelRun) cancelAfter(d time.Duration, cancel context.CancelFunc) {
	time.AfterFunc(d, func() {
		r.mu.Lock()
		r.cancelAt = time.Now()
		r.mu.Unlock()
		cancel()
	})
}

func TestCancelAtRandomMoments(t *testing.T) {
	const cases, workers = 1000, 25
	phases := []struct{ api, phase string }{
		{"Do", "attempt"}, {"Do", "sleep"}, {"Transport", "attempt"}, {"Transport", "drain"}, {"Transport", "sleep"},
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	var failed, replayed atomic.Int32
	for i := range cases {
		r := rand.New(rand.NewPCG(uint64(i), 7))
		ph := phases[i%len(phases)]
		c := cancelCase{api: ph.api, phase: ph.phase, at: 1 + r.IntN(2), offset: time.Duration(r.IntN(3000)) * time.Microsecond}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			msg := runCancelCase(c)
			// A call that returned late may have waited for a core on a
			// loaded machine: it is played again, twice at most, and fails
			// only if it is late every time. Every other failure counts at once.
			for try := 0; try < 2 && strings.HasPrefix(msg, lateReturn); try++ {
				replayed.Add(1)
				msg = runCancelCase(c)
			}
			if msg != "" && failed.Add(1) <= 5 {
				t.Errorf("%+v: %s", c, msg)
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls cancelled at random moments, %d failed, %d played again after returning late",
		cases, failed.Load(), replayed.Load())
}

// lateReturn begins runCancelCase's report of a call that returned more
// than 50 ms after its cancel.
const lateReturn = "returned "

// runCancelCase plays c and returns what went wrong, or "".
func runCancelCase(c cancelCase) string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := &cancelRun{}
	// Sleeps of 2 ms lead to the attempt where the cancel comes; a sleep
	// cancelled itself lasts a second, so one that outlived its cancel would
	// show.
	p := retry.Policy{MaxAttempts: 5, AttemptTimeout: 2 * time.Second, Deadline: 10 * time.Second,
		Base: time.Second, Cap: time.Second, Rand: func() float64 { return 0.002 }}
	if c.phase == "sleep" {
		var draws atomic.Int32
		p.Rand = func() float64 {
			if draws.Add(1) == int32(c.at) {
				return 1
			}
			return 0.002
		}
		p.OnRetry = func(e retry.Event) {
			if e.Attempt == c.at {
				run.cancelAfter(c.offset, cancel)
			}
		}
	}
	var err error
	if c.api == "Do" {
		_, err = retry.Do(ctx, p, func(actx context.Context) (int, error) {
			if n := run.start(); n == c.at && c.phase == "attempt" {
				run.cancelAfter(c.offset, cancel)
				<-actx.Done()
				return 0, actx.Err()
			}
			return 0, io.ErrUnexpectedEOF
		})
	} else {
		var resp *http.Response
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
		resp, err = retry.NewTransport(&cancelBase{c: c, run: run, cancel: cancel}, p).RoundTrip(req)
		if resp != nil {
			// A cancel that comes after the headers, before the drain
			// began, leaves the caller the response, as net/http would.
			resp.Body.Close()
			if c.phase != "drain" {
				return fmt.Sprintf("got a %d response, want an error", resp.StatusCode)
			}
			err = context.Canceled
		}
	}
	returned := time.Now()
	run.mu.Lock()
	defer run.mu.Unlock()
	switch {
	case run.cancelAt.IsZero():
		return fmt.Sprintf("never cancelled: %d attempts, %v", len(run.starts), err)
	case !errors.Is(err, context.Canceled):
		return fmt.Sprintf("error %v, want one that is context.Canceled", err)
	case returned.Sub(run.cancelAt) > 50*time.Millisecond:
		return fmt.Sprintf("%s%v after the cancel", lateReturn, returned.Sub(run.cancelAt))
	}
	for i, s := range run.starts {
		if s.After(run.cancelAt) {
			return fmt.Sprintf("attempt %d started %v after the cancel", i+1, s.Sub(run.cancelAt))
		}
	}
	return ""
}

// cancelBase answers 503 at once, except at the attempt where the cancel
// comes: there it hangs until the attempt is over ("attempt"), or returns a
// 503 whose body stalls after a few bytes ("drain").
type cancelBase struct {
	c      cancelCase
	run    *cancelRun
	cancel context.CancelFunc
}

func (b *cancelBase) RoundTrip(req *http.Request) (*http.Response, error) {
	n := b.run.start()
	resp := &http.Response{StatusCode: 503, Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader("busy"))}
	if n != b.c.at {
		return resp, nil
	}
	switch b.c.phase {
	case "attempt":
		b.run.cancelAfter(b.c.offset, b.cancel)
		<-req.Context().Done()
		return nil, req.Context().Err()
	case "drain":
		b.run.cancelAfter(b.c.offset, b.cancel)
		resp.Body = &stallBody{ctx: req.Context(), data: "partial"}
	}
	return resp, nil
}

// stallBody returns data, then blocks until ctx is done.
type stallBody struct {
	ctx  context.Context
	data string
}

func (b *stallBody) Read(p []byte) (int, error) {
	if b.data != "" {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *stallBody) Close() error { return nil }

// A caller that cancels while a discarded response is being drained gets
// no retry, so OnRetry must not report one.
func TestCancelDuringDrainReportsNoRetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events []retry.Event
	p := retry.Policy{MaxAttempts: 3, Sleep: func(context.Context, time.Duration) error { return nil },
		OnRetry: func(e retry.Event) { events = append(events, e) }}
	base := oddBase{func(req *http.Request) (*http.Response, error) {
		time.AfterFunc(5*time.Millisecond, cancel)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Request: req,
			Body: &stallBody{ctx: req.Context(), data: "partial"}}, nil
	}}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
	resp, err := retry.NewTransport(base, p).RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
		t.Fatalf("got a %d response, want an error", resp.StatusCode)
	}
	if !errors.Is(err, context.Canceled) || len(events) != 0 {
		t.Errorf("RoundTrip = %v with events %+v; want context.Canceled and no event", err, events)
	}
}
