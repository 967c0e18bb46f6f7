package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/retrykit/retry"
)

// slowServer answers each request after the delay that plan gives its
// number (counting from 1), with status 200 unless plan says otherwise,
// and a body of its number. It counts the bodies it handed out that are
// not closed yet, and the requests whose context ended before the answer.
type slowServer struct {
	plan func(n int) (time.Duration, int)

	mu        sync.Mutex
	n         int
	open      int
	cancelled int
	bodies    []string // each request's body, as received
}

func (s *slowServer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		_ = req.Body.Close()
		body = string(b)
	}
	s.mu.Lock()
	s.n++
	n := s.n
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	d, code := s.plan(n)
	select {
	case <-time.After(d):
	case <-req.Context().Done():
		s.mu.Lock()
		s.cancelled++
		s.mu.Unlock()
		return nil, req.Context().Err()
	}
	s.mu.Lock()
	s.open++
	s.mu.Unlock()
	return &http.Response{StatusCode: code, Header: http.Header{}, Request: req,
		Body: &hedgeBody{Reader: strings.NewReader(fmt.Sprint(n)), s: s}}, nil
}

func (s *slowServer) counts() (sent, open, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.open, s.cancelled
}

type hedgeBody struct {
	io.Reader
	s      *slowServer
	closed atomic.Bool
}

func (b *hedgeBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.s.mu.Lock()
		b.s.open--
		b.s.mu.Unlock()
	}
	return nil
}

// hedged is a Transport over s that hedges once after delay, and the
// Outcomes and Events of its calls.
type hedged struct {
	tr       *retry.Transport
	mu       sync.Mutex
	outcomes []retry.Outcome
	events   []retry.Event
}

func newHedged(s http.RoundTripper, h retry.Hedge) *hedged {
	x := &hedged{}
	x.tr = &retry.Transport{Base: s, Policy: retry.Policy{Hedge: h,
		OnDone: func(o retry.Outcome) {
			x.mu.Lock()
			x.outcomes = append(x.outcomes, o)
			x.mu.Unlock()
		},
		OnRetry: func(e retry.Event) {
			x.mu.Lock()
			x.events = append(x.events, e)
			x.mu.Unlock()
		}}}
	return x
}

func (x *hedged) get(t *testing.T, method string, body io.Reader) (string, int, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://store.example/objects/1", body)
	start := time.Now()
	resp, err := x.tr.RoundTrip(req)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the winner's body: %v", err)
	}
	return string(b), resp.StatusCode, took
}

// TestHedgeTakesTheFirstAnswer: an attempt with no answer after the delay
// is hedged; the hedge's answer wins, whole; the slow attempt is
// cancelled; the call counts two attempts, one of them a hedge.
func TestHedgeTakesTheFirstAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowServer{plan: func(n int) (time.Duration, int) {
			if n == 1 {
				return time.Second, 200
			}
			return 10 * time.Millisecond, 200
		}}
		x := newHedged(s, retry.Hedge{Max: 1, Delay: 50 * time.Millisecond})
		body, _, took := x.get(t, http.MethodGet, nil)
		if body != "2" || took != 60*time.Millisecond {
			t.Errorf("got the answer of request %s after %v, want request 2's after 60ms", body, took)
		}
		synctest.Wait()
		if sent, open, cancelled := s.counts(); sent != 2 || open != 0 || cancelled != 1 {
			t.Errorf("sent %d, %d bodies open, %d cancelled; want 2, 0, 1", sent, open, cancelled)
		}
		o := x.outcomes[0]
		if o.Attempts != 2 || o.Hedges != 1 || o.Err != nil {
			t.Errorf("outcome = %+v, want 2 attempts, 1 hedge, no error", o)
		}
		if len(x.events) != 1 || !x.events[0].Hedge || x.events[0].Attempt != 1 || x.events[0].Delay != 50*time.Millisecond || x.events[0].Err != nil {
			t.Errorf("events = %+v, want one hedge after attempt 1 and 50ms", x.events)
		}
	})
}

// TestHedgeOnlyWhatMayRunTwice: a POST without a key, and a body without
// GetBody, are never hedged; a POST with an idempotency key is, with the
// same body and key on both.
func TestHedgeOnlyWhatMayRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowFirst := func(n int) (time.Duration, int) {
			if n == 1 {
				return 200 * time.Millisecond, 200
			}
			return time.Millisecond, 200
		}
		h := retry.Hedge{Max: 1, Delay: 50 * time.Millisecond}

		s := &slowServer{plan: slowFirst}
		if body, _, _ := newHedged(s, h).get(t, http.MethodPost, strings.NewReader("create")); body != "1" {
			t.Errorf("a POST without a key: got request %s's answer, want the only request's", body)
		}
		if sent, _, _ := s.counts(); sent != 1 {
			t.Errorf("a POST without a key was sent %d times, want 1", sent)
		}

		s = &slowServer{plan: slowFirst}
		if body, _, _ := newHedged(s, h).get(t, http.MethodPut, io.NopCloser(strings.NewReader("put"))); body != "1" {
			t.Errorf("a body without GetBody: got request %s's answer, want the only request's", body)
		}
		if sent, _, _ := s.counts(); sent != 1 {
			t.Errorf("a body without GetBody was sent %d times, want 1", sent)
		}

		s = &slowServer{plan: slowFirst}
		x := newHedged(s, h)
		var keys []string
		var mu sync.Mutex
		x.tr.Base = roundTripper(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			keys = append(keys, req.Header.Get("Idempotency-Key"))
			mu.Unlock()
			return s.RoundTrip(req)
		})
		req, _ := http.NewRequest(http.MethodPost, "http://store.example/objects", strings.NewReader("create"))
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := x.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		synctest.Wait()
		if len(s.bodies) != 2 || s.bodies[0] != "create" || s.bodies[1] != "create" || keys[0] != "k1" || keys[1] != "k1" {
			t.Errorf("a keyed POST: bodies %q and keys %q, want two of each the same", s.bodies, keys)
		}
	})
}

// TestHedgeAfterAFailure: a retryable failure sends the next hedge at once,
// without waiting for the delay; a failure ends the call only when no
// attempt is left in flight.
func TestHedgeAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowServer{plan: func(n int) (time.Duration, int) {
			if n == 1 {
				return 5 * time.Millisecond, http.StatusServiceUnavailable
			}
			return 5 * time.Millisecond, 200
		}}
		x := newHedged(s, retry.Hedge{Max: 1, Delay: time.Second})
		body, code, took := x.get(t, http.MethodGet, nil)
		if body != "2" || code != 200 || took != 10*time.Millisecond {
			t.Errorf("got %d from request %s after %v, want request 2's 200 after 10ms", code, body, took)
		}
		synctest.Wait()
		if _, open, _ := s.counts(); open != 0 {
			t.Errorf("%d bodies open, want 0: the 503 is closed", open)
		}
		if e := x.events; len(e) != 1 || !e[0].Hedge || e[0].Delay != 0 || e[0].Err == nil {
			t.Errorf("events = %+v, want one hedge sent at once after the 503", e)
		}
	})
}

// TestHedgeBounds: hedges count against MaxAttempts, and a Budget that
// refuses stops them; neither touches an attempt in flight.
func TestHedgeBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(n int) (time.Duration, int) { return time.Duration(5-n) * 100 * time.Millisecond, 200 }
		s := &slowServer{plan: slow}
		x := newHedged(s, retry.Hedge{Max: 5, Delay: 10 * time.Millisecond})
		x.tr.Policy.MaxAttempts = 3
		x.get(t, http.MethodGet, nil)
		if sent, _, _ := s.counts(); sent != 3 || x.outcomes[0].Attempts != 3 || x.outcomes[0].Hedges != 2 {
			t.Errorf("sent %d, outcome %+v; want 3 attempts, 2 of them hedges", sent, x.outcomes[0])
		}

		s = &slowServer{plan: slow}
		x = newHedged(s, retry.Hedge{Max: 5, Delay: 10 * time.Millisecond})
		x.tr.Policy.Budget = &retry.Budget{Ratio: 0.01, MinPerSecond: 0.01} // nothing to spend yet
		body, _, took := x.get(t, http.MethodGet, nil)
		if sent, _, _ := s.counts(); sent != 1 || body != "1" || took != 400*time.Millisecond {
			t.Errorf("with a Budget that refuses: sent %d, got %s after %v; want the first attempt alone, after 400ms", sent, body, took)
		}
	})
}

// TestHedgeAdaptiveDelay: the adaptive delay learns the 95th percentile
// of recent times to answer, within its floor and cap.
func TestHedgeAdaptiveDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowServer{plan: func(n int) (time.Duration, int) {
			if n%50 == 0 { // 2% straggle
				return 500 * time.Millisecond, 200
			}
			return time.Duration(10+n%10) * time.Millisecond, 200 // 10 to 19 ms
		}}
		d := &retry.HedgeDelay{}
		x := newHedged(s, retry.Hedge{Max: 1, Adaptive: d})
		for range 200 {
			x.get(t, http.MethodGet, nil)
		}
		var hedges int
		var slowest time.Duration
		for _, o := range x.outcomes[100:] {
			hedges += o.Hedges
		}
		for range 20 {
			_, _, took := x.get(t, http.MethodGet, nil)
			slowest = max(slowest, took)
		}
		// About 12 of 100 calls reach the delay: the 2% that straggle, and
		// the tenth that take 19 ms, the 95th percentile itself, which
		// answer as the delay ends and may be hedged or not.
		if hedges < 2 || hedges > 16 {
			t.Errorf("%d hedges in 100 calls once learned, want 2 to 16: the stragglers, and some of the slowest of the rest", hedges)
		}
		if slowest > 100*time.Millisecond {
			t.Errorf("the slowest of 20 calls took %v once the delay was learned, want well under the 500ms straggler", slowest)
		}
	})
}

// TestHedgeInvalid: a Hedge that cannot work is a configuration error.
func TestHedgeInvalid(t *testing.T) {
	for _, h := range []retry.Hedge{
		{Max: -1},
		{Max: 1}, // no delay and no Adaptive
		{Max: 1, Delay: -time.Second},
		{Max: 1, Adaptive: &retry.HedgeDelay{Quantile: 1}},
		{Max: 1, Adaptive: &retry.HedgeDelay{Min: time.Second, Max: time.Millisecond}},
	} {
		_, err := retry.Do(context.Background(), retry.Policy{Hedge: h}, func(context.Context) (int, error) { return 1, nil })
		if !errors.Is(err, retry.ErrInvalidPolicy) {
			t.Errorf("Hedge %+v: err = %v, want ErrInvalidPolicy", h, err)
		}
	}
}

// TestHedgeDo: Do hedges fn when the Policy says so: a slow attempt's
// hedge answers first, under an attempt number of its own, and the slow
// one's context is cancelled.
func TestHedgeDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Int64
		p := retry.Policy{Hedge: retry.Hedge{Max: 1, Delay: 20 * time.Millisecond}}
		start := time.Now()
		v, err := retry.Do(context.Background(), p, func(ctx context.Context) (int, error) {
			n, _ := retry.AttemptFromContext(ctx)
			d := 5 * time.Millisecond
			if n == 1 {
				d = time.Second
			}
			select {
			case <-time.After(d):
				return n, nil
			case <-ctx.Done():
				cancelled.Add(1)
				return 0, ctx.Err()
			}
		})
		if err != nil || v != 2 || time.Since(start) != 25*time.Millisecond {
			t.Errorf("Do = %d, %v after %v; want attempt 2's answer after 25ms", v, err, time.Since(start))
		}
		synctest.Wait()
		if cancelled.Load() != 1 {
			t.Errorf("%d attempts cancelled, want the slow one", cancelled.Load())
		}
	})
}

// TestHedgeLeavesNothing runs 100,000 hedged calls, many of them hedged,
// some hedges failing, and checks that no response body is left open and
// no goroutine is left behind.
func TestHedgeLeavesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	func() { // real time: the delays are of milliseconds
		t := t
		s := &slowServer{plan: func(n int) (time.Duration, int) {
			switch {
			case n%7 == 0:
				return 3 * time.Millisecond, http.StatusServiceUnavailable
			case n%5 == 0:
				return 50 * time.Millisecond, 200
			}
			return time.Duration(n%3) * time.Millisecond, 200
		}}
		tr := &retry.Transport{Base: s, Policy: retry.Policy{MaxAttempts: 4, Base: time.Millisecond,
			Hedge: retry.Hedge{Max: 2, Delay: 2 * time.Millisecond}}}
		var hedges atomic.Int64
		tr.Policy.OnDone = func(o retry.Outcome) { hedges.Add(int64(o.Hedges)) }
		// 50 callers at a time, each making 100 calls, twenty times over:
		// goroutines that each make fewer calls keep the race detector's
		// per-goroutine clocks small.
		const callers, calls, rounds = 50, 100, 20
		for range rounds {
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range calls {
						req, _ := http.NewRequest(http.MethodGet, "http://store.example/objects/1", nil)
						resp, err := tr.RoundTrip(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
				})
			}
			wg.Wait()
		}
		// The losers' goroutines end once their attempts return, cancelled.
		deadline := time.Now().Add(10 * time.Second)
		for _, open, _ := s.counts(); open != 0 && time.Now().Before(deadline); _, open, _ = s.counts() {
			time.Sleep(time.Millisecond)
		}
		sent, open, _ := s.counts()
		if open != 0 {
			t.Errorf("%d response bodies left open after %d calls", open, callers*calls*rounds)
		}
		if hedges.Load() < callers*calls*rounds/10 {
			t.Errorf("%d hedges in %d calls, want many: the test must exercise them", hedges.Load(), callers*calls*rounds)
		}
		t.Logf("%d calls, %d requests, %d hedges", callers*calls*rounds, sent, hedges.Load())
	}()
}

// TestHedgeHasItsOwnTimeout: a hedge's attempt timeout runs from its own
// send: the first attempt's timing out does not cut it.
func TestHedgeHasItsOwnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowServer{plan: func(n int) (time.Duration, int) {
			if n == 1 {
				return time.Hour, 200 // hangs
			}
			return time.Second, 200
		}}
		x := newHedged(s, retry.Hedge{Max: 1, Delay: 1500 * time.Millisecond})
		x.tr.Policy.AttemptTimeout = 2 * time.Second
		x.tr.Policy.MaxAttempts = 2
		body, _, took := x.get(t, http.MethodGet, nil)
		if body != "2" || took != 2500*time.Millisecond {
			t.Errorf("got request %s's answer after %v, want the hedge's after 2.5s", body, took)
		}
	})
}
