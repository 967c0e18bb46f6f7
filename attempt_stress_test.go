package retry

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttemptErrNeverBeforeDone: Err never reports an end while Done is
// still open, though the end is published a moment before the channel
// closes.
func TestAttemptErrNeverBeforeDone(t *testing.T) {
	t.Parallel()
	for i := 0; i < 5000; i++ {
		c := newAttempt(context.Background(), hang)
		d := c.Done() // watched
		go c.release()
		for c.Err() == nil {
			runtime.Gosched()
		}
		select {
		case <-d:
		default:
			t.Fatalf("round %d: Err() = %v while Done is open", i, c.Err())
		}
	}
}

// TestAttemptUnlimitedTimeout: the largest Duration, a natural way to write
// "no limit", never wraps an attempt's deadline into the past.
func TestAttemptUnlimitedTimeout(t *testing.T) {
	t.Parallel()
	huge := time.Duration(math.MaxInt64)
	_, err := Do(context.Background(), Policy{AttemptTimeout: huge, Deadline: huge, MaxAttempts: 1},
		func(ctx context.Context) (int, error) {
			time.Sleep(time.Millisecond)
			return 1, ctx.Err()
		})
	if err != nil {
		t.Errorf("Do with unlimited timeouts: %v", err)
	}
	var seen error
	var deadline time.Time
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		seen = req.Context().Err()
		deadline, _ = req.Context().Deadline()
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	tr := NewTransport(base, Policy{AttemptTimeout: huge, Deadline: huge})
	if _, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil)); err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	if seen != nil || deadline.Before(time.Now().Add(100*365*24*time.Hour)) {
		t.Errorf("attempt context: Err() = %v, Deadline() = %v; want nil and a century away at least", seen, deadline)
	}
}

// TestAttemptForgetsCancelledChildren: contexts derived from an attempt and
// cancelled one after another, as a function given to Do that pages
// through an API makes them, leave nothing registered with it.
func TestAttemptForgetsCancelledChildren(t *testing.T) {
	t.Parallel()
	c := newAttempt(context.Background(), hang)
	defer c.release()
	for range 10000 {
		_, cancel := context.WithCancel(c)
		cancel()
	}
	c.mu.Lock()
	n := len(c.more)
	c.mu.Unlock()
	if n > 0 {
		t.Errorf("%d cancelled children still registered with the attempt", n)
	}
}

// TestAttemptStress runs the attempt context's operations from several
// goroutines at random and checks the end: Done closed, Err set, every
// derived context cancelled.
func TestAttemptStress(t *testing.T) {
	t.Parallel()
	for i := 0; i < 1000; i++ {
		parent, pcancel := context.WithCancel(context.Background())
		c := newAttempt(parent, time.Duration(rand.IntN(200))*time.Microsecond)
		var wg sync.WaitGroup
		var kmu sync.Mutex
		var kids []context.Context
		var stops []context.CancelFunc
		ops := []func(){
			func() { _ = c.Done() },
			func() { _ = c.Err() },
			func() {
				k, stop := context.WithCancel(c)
				kmu.Lock()
				kids, stops = append(kids, k), append(stops, stop)
				kmu.Unlock()
			},
			func() { c.release() },
			func() { c.end(timedOut) },
			func() { c.stopTimeout() },
			func() { _ = c.timedOut() },
			func() {
				if rand.IntN(20) == 0 {
					pcancel()
				}
			},
		}
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					ops[rand.IntN(len(ops))]()
				}
			}()
		}
		wg.Wait()
		c.release()
		if !closedWithin(c.Done(), hang) || c.Err() == nil {
			t.Fatalf("round %d: the attempt did not end", i)
		}
		for _, k := range kids {
			if !closedWithin(k.Done(), hang) {
				t.Fatalf("round %d: a derived context outlived the attempt", i)
			}
		}
		for _, stop := range stops {
			stop()
		}
		pcancel()
	}
}

// TestAttemptAfterFuncStopRace races registrations, their stops and the
// end: every function runs exactly once, unless its stop reported true.
func TestAttemptAfterFuncStopRace(t *testing.T) {
	t.Parallel()
	for i := 0; i < 1000; i++ {
		c := newAttempt(context.Background(), hang)
		if i%2 == 0 {
			_ = c.Done()
		}
		const n = 8
		var ran [n]atomic.Int32
		var stopped [n]atomic.Bool
		var wg sync.WaitGroup
		for j := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stop := c.AfterFunc(func() { ran[j].Add(1) })
				if j%2 == 0 {
					stopped[j].Store(stop())
					if stop() {
						t.Error("a second stop() = true")
					}
				}
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); c.release() }()
		wg.Wait()
		for j := range n {
			want := int32(1)
			if stopped[j].Load() {
				want = 0
			}
			for deadline := time.Now().Add(hang); ran[j].Load() != want && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if got := ran[j].Load(); got != want {
				t.Fatalf("round %d: function %d ran %d times, want %d (stop reported %v)", i, j, got, want, stopped[j].Load())
			}
		}
	}
}
