package pace

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
)

// windowServer is an in-memory server of a fixed-window rate limit, as
// GitHub keeps one: windows of a fixed length aligned to the Unix epoch,
// x-ratelimit-reset the window's end in Unix seconds, and a Date header
// read to the whole second. Requests take latency to arrive and as long
// again to be answered, so that requests sent together can be counted in
// another order. Run it under testing/synctest, where time is virtual.
type windowServer struct {
	limit  int
	window time.Duration
	// wobble makes the server report each end as the current second
	// plus the time to live rounded to the second, as limiters backed by
	// a key's TTL do: the end moves by a second from one response to the
	// next.
	wobble  bool
	latency func() time.Duration // nil: none

	mu      sync.Mutex // protects the fields below
	win     int64      // the current window's index
	used    int
	sent    int
	refused int
	last    time.Time // the last request granted
}

func (s *windowServer) RoundTrip(req *http.Request) (*http.Response, error) {
	var lat time.Duration
	if s.latency != nil {
		s.mu.Lock()
		lat = s.latency()
		s.mu.Unlock()
	}
	time.Sleep(lat)
	s.mu.Lock()
	now := time.Now()
	w := now.UnixNano() / int64(s.window)
	if w != s.win {
		s.win, s.used = w, 0
	}
	s.sent++
	code := http.StatusOK
	if s.used >= s.limit {
		code = http.StatusTooManyRequests
		s.refused++
	} else {
		s.used++
		s.last = now
	}
	end := time.Unix(0, (w+1)*int64(s.window))
	reset := end.Unix()
	if s.wobble {
		reset = now.Unix() + int64(end.Sub(now).Round(time.Second)/time.Second)
	}
	h := http.Header{
		"Date":                  {now.UTC().Format(http.TimeFormat)},
		"X-Ratelimit-Limit":     {strconv.Itoa(s.limit)},
		"X-Ratelimit-Remaining": {strconv.Itoa(s.limit - s.used)},
		"X-Ratelimit-Reset":     {strconv.FormatInt(reset, 10)},
	}
	s.mu.Unlock()
	time.Sleep(lat)
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
}

// counts returns the requests the server saw and refused.
func (s *windowServer) counts() (sent, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.refused
}

// callAll makes calls calls through tr from callers goroutines at once and
// returns the errors of those that failed.
func callAll(tr http.RoundTripper, callers, calls int) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan struct{}, calls)
	for range calls {
		next <- struct{}{}
	}
	close(next)
	for range callers {
		wg.Go(func() {
			for range next {
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// TestPacerWindowRollover: the Pacer's window end, read from whole-second
// Date headers, may run up to a second late. A response from the server's
// new window must begin the new window, not keep the old one's level.
func TestPacerWindowRollover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &windowServer{limit: 10, window: time.Minute}
		tr := &retry.Transport{Base: srv, Pacer: &Pacer{}, Policy: retry.Policy{Deadline: 10 * time.Second}}
		// 30.05 s before the window ends: Date says 31 s before it, so
		// the Pacer takes the end to be 0.95 s later than it is.
		// (A bubble's clock starts on a minute.)
		time.Sleep(29950 * time.Millisecond)
		if errs := callAll(tr, 1, 7); len(errs) > 0 {
			t.Fatal(errs)
		}
		// The window ends; 0.3 s into the next one, one call learns that
		// 9 of 10 are left, and nine callers come together.
		time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute + 300*time.Millisecond)))
		if errs := callAll(tr, 1, 1); len(errs) > 0 {
			t.Fatal(errs)
		}
		if errs := callAll(tr, 9, 9); len(errs) > 0 {
			t.Errorf("%d of 9 calls failed while the server had 9 left: %v", len(errs), errs[0])
		}
		if _, refused := srv.counts(); refused > 0 {
			t.Errorf("%d requests refused", refused)
		}
	})
}

// TestPacerWindowEndsWobble: a server that reports the current second plus
// a rounded time to live moves each window's end by a second. The Pacer
// must not take that second for the window's length.
func TestPacerWindowEndsWobble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &windowServer{limit: 10, window: time.Minute, wobble: true}
		tr := &retry.Transport{Base: srv, Pacer: &Pacer{}, Policy: retry.Policy{Deadline: 5 * time.Minute, MaxAttempts: 1}}
		time.Sleep(17300 * time.Millisecond) // into a window, between seconds
		// Ends seen in the first window, at instants the rounding
		// straddles.
		for range 3 {
			if errs := callAll(tr, 1, 1); len(errs) > 0 {
				t.Fatal(errs)
			}
			time.Sleep(600 * time.Millisecond)
		}
		errs := callAll(tr, 30, 30)
		if sent, refused := srv.counts(); refused > 0 || len(errs) > 0 {
			t.Errorf("%d of %d requests refused, %d calls failed; want none", refused, sent, len(errs))
		}
	})
}

// TestPacerServerOrderIsNoShortfall: ten requests in flight, counted by the
// server in the reverse of the order they were sent: the first answer's
// remaining count is below what its reservation expected by the requests
// sent after it, which is no other client's use.
func TestPacerServerOrderIsNoShortfall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &reorderServer{n: 10}
		var mu sync.Mutex
		var waits []time.Duration
		p := &Pacer{OnWait: func(e Event) {
			mu.Lock()
			waits = append(waits, e.Delay)
			mu.Unlock()
		}}
		tr := &retry.Transport{Base: base, Pacer: p, Policy: retry.Policy{Deadline: time.Minute}}
		// A first response: 10 per 10 s, all 10 left.
		base.first = true
		if errs := callAll(tr, 1, 1); len(errs) > 0 {
			t.Fatal(errs)
		}
		if errs := callAll(tr, 10, 10); len(errs) > 0 {
			t.Fatal(errs)
		}
		mu.Lock()
		waits = nil
		mu.Unlock()
		if errs := callAll(tr, 1, 1); len(errs) > 0 {
			t.Fatal(errs)
		}
		mu.Lock()
		defer mu.Unlock()
		// After 10 sent at once the bucket is empty, refilling one a
		// second: the next waits a second at most.
		if len(waits) != 1 || waits[0] > time.Second+100*time.Millisecond {
			t.Errorf("next call's waits = %v, want one of at most 1s", waits)
		}
	})
}

// reorderServer answers with OpenAI's headers: 10 requests per 10 s. After
// its first request, it holds requests until n have come, counts them in
// the reverse of their arrival, and answers them in arrival order; later
// requests it counts and answers at once.
type reorderServer struct {
	n     int
	first bool

	mu      sync.Mutex
	waiting []chan int
	left    int
	batched bool
}

func (s *reorderServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	remaining := 10
	switch {
	case s.first:
		s.first = false
		s.left = 10
		s.mu.Unlock()
	case s.batched:
		s.left = max(s.left-1, 0)
		remaining = s.left
		s.mu.Unlock()
	default:
		c := make(chan int, 1)
		s.waiting = append(s.waiting, c)
		if len(s.waiting) == s.n {
			// Counted in reverse: the last to arrive is counted first.
			for i := len(s.waiting) - 1; i >= 0; i-- {
				s.left--
				s.waiting[i] <- s.left
			}
			s.waiting, s.batched = nil, true
		}
		s.mu.Unlock()
		// Answers go out in arrival order, a millisecond apart.
		remaining = <-c
		time.Sleep(time.Duration(s.n-remaining) * time.Millisecond)
	}
	h := openAIHeaders(10, remaining, "10s")
	if remaining < 10 {
		h.Set("X-Ratelimit-Reset-Requests", strconv.Itoa(10-remaining)+"s")
	}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: req}, nil
}

// TestPacerForgetsOneKeyAtATime: a Pacer at its limit of keys takes a new
// key's place from one idle key, never from one whose Retry-After runs.
func TestPacerForgetsOneKeyAtATime(t *testing.T) {
	t.Parallel()
	rt := &scriptedRT{script: []http.Header{hdr("Status", "429", "Retry-After", "60")}}
	tr, _ := pacedTransport(rt, retry.Policy{MaxAttempts: 1, Deadline: 10 * time.Second})
	host := func(i int) string { return "https://h" + strconv.Itoa(i) + ".example.com/" }
	for i := range maxPacerKeys {
		if resp, err := get(t, tr, host(i)); err != nil || resp.StatusCode != 429 {
			t.Fatalf("call %d: %v, %v", i, resp, err)
		}
	}
	// One more key: every key held by a Retry-After is kept.
	if _, err := get(t, tr, host(maxPacerKeys)); err != nil {
		t.Fatal(err)
	}
	_, err := get(t, tr, host(0))
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonDeadline || e.Attempts != 0 {
		t.Errorf("a held key after the 1,025th: %v, want retry.ReasonDeadline with nothing sent", err)
	}
}

func TestPacerEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	var p Pacer
	req := func(i int) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "https://h"+strconv.Itoa(i)+".example.com/", nil)
		return r
	}
	for i := range maxPacerKeys {
		k := p.add(req(i), at(time.Duration(i)))
		if i == 7 {
			k.inflight = 1 // busy: never forgotten
		}
	}
	// Key 3 is used again: key 0 is now the least recently used.
	p.lookup(req(3)).used = at(time.Hour)
	p.add(req(maxPacerKeys), at(2*time.Hour))
	p.add(req(maxPacerKeys+1), at(2*time.Hour))
	for i, want := range map[int]bool{0: false, 1: false, 2: true, 3: true, 7: true, maxPacerKeys: true, maxPacerKeys + 1: true} {
		if got := p.lookup(req(i)) != nil; got != want {
			t.Errorf("key %d remembered = %v, want %v", i, got, want)
		}
	}
	if n := len(*p.keys.Load()); n != maxPacerKeys {
		t.Errorf("%d keys, want %d", n, maxPacerKeys)
	}
}

// TestPacerRetryAfterOneDraw: the Pacer's hold on a key and the refused
// caller's own sleep are one Retry-After: jittered once, they end
// together, and a call whose Deadline the jittered hold passes gives up at
// once with the response.
func TestPacerRetryAfterOneDraw(t *testing.T) {
	t.Parallel()
	draws := []float64{0.9, 0.5, 0.1}
	var i int
	var mu sync.Mutex
	rnd := func() float64 {
		mu.Lock()
		defer mu.Unlock()
		f := draws[i%len(draws)]
		i++
		return f
	}
	rt := &scriptedRT{script: []http.Header{hdr("Status", "429", "Retry-After", "10"), {}}}
	p, _ := fakeTime(retry.Policy{Deadline: 11500 * time.Millisecond, RetryAfterJitter: 0.2})
	p.Rand = rnd
	tr := &retry.Transport{Base: rt, Policy: p, Pacer: &Pacer{}}
	resp, err := get(t, tr, "https://api.example.com/")
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("got %v, %v; want the 429, since the jittered Retry-After (11.8s) passes the Deadline", resp, err)
	}
	if n := rt.count("api.example.com"); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestPacerHoldsKeyOn403And529: GitHub's secondary limit (403 with
// Retry-After) and Anthropic's overloaded (529 with Retry-After) hold every
// caller of the key, as a 429 does.
func TestPacerHoldsKeyOn403And529(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"403", "529"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			rt := &scriptedRT{script: []http.Header{hdr("Status", code, "Retry-After", "5"), {}}}
			tr, events := pacedTransport(rt, retry.Policy{MaxAttempts: 1})
			if _, err := get(t, tr, "https://api.example.com/"); err != nil {
				t.Fatal(err)
			}
			if _, err := get(t, tr, "https://api.example.com/"); err != nil {
				t.Fatal(err)
			}
			if len(*events) != 1 || (*events)[0].Delay != 5*time.Second || !(*events)[0].RetryAfter {
				t.Errorf("waits %+v, want one of 5s for the Retry-After", *events)
			}
		})
	}
}

// TestPacerGitHubSimulation: callers sharing a GitHub-style window, whose
// requests the server counts in another order than they were sent, finish
// within 1.10 times the ideal schedule's time, in every one of 20 runs.
func TestPacerGitHubSimulation(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				const limit, window, calls = 10, time.Minute, 100
				srv := &windowServer{limit: limit, window: window,
					latency: func() time.Duration { return time.Duration(rng.Int64N(int64(200 * time.Millisecond))) }}
				tr := &retry.Transport{Base: srv, Pacer: &Pacer{}, Policy: retry.Policy{Deadline: 30 * time.Minute}}
				time.Sleep(time.Duration(rng.Int64N(int64(window))))
				start := time.Now()
				// The ideal: 10 calls in each window, the last ten at the
				// start of the tenth window from this one.
				ideal := start.Truncate(window).Add(9 * window).Sub(start)
				errs := callAll(tr, 20, calls)
				took := srv.last.Sub(start)
				sent, refused := srv.counts()
				t.Logf("took %v, ideal %v (%.3fx); %d sent, %d refused", took, ideal, float64(took)/float64(ideal), sent, refused)
				if len(errs) > 0 {
					t.Errorf("%d calls failed: %v", len(errs), errs[0])
				}
				if float64(took) > 1.10*float64(ideal) {
					t.Errorf("took %v, more than 1.10 x the ideal %v", took, ideal)
				}
			})
		})
	}
}

// TestPacerGuessedWindowPastItsEnd: when a window's length is not known
// and its guessed end passes before any response dates the next one,
// newcomers queue behind the caller already waiting; none is sent past the
// limit.
func TestPacerGuessedWindowPastItsEnd(t *testing.T) {
	t.Parallel()
	var b bucket
	b.learn(&limitObs{kind: kindWindow, limit: 2, remaining: 0, reset: time.Second, slack: time.Second}, snapshot{}, at(0))
	for range 2 {
		b.take(1, at(2*time.Second))
		b.send(1, at(2*time.Second))
	}
	b.take(1, at(3*time.Second)) // queued for the next window
	sent := 0
	for range 50 {
		if w, _ := b.take(1, at(5*time.Second)); w <= 0 {
			b.send(1, at(5*time.Second))
			sent++
		}
	}
	if sent > 0 {
		t.Errorf("%d newcomers sent at once ahead of a waiter, before any response dated the window", sent)
	}
}

// TestPacerTicketOfAnUnknownDimension: a request that reserved while its
// key knew no limit (the key was held by a Retry-After alone) gives back
// nothing when it gives up, though the bucket learned a limit meanwhile:
// the places in its queue are others'.
func TestPacerTicketOfAnUnknownDimension(t *testing.T) {
	t.Parallel()
	p := &Pacer{}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	clockAt := func(ns int64) clockwork.Clock { return clockwork.NewFakeClockAt(time.Unix(0, ns)) }
	k := p.add(req, at(0))
	k.blocked = at(10 * time.Second)
	var a, b paceTicket
	p.reserve(&a, req, clockAt(at(0)), 0)
	k.mu.Lock()
	k.requests.learn(&limitObs{kind: kindWindow, limit: 10, remaining: 0, reset: 30 * time.Second, slack: time.Second}, snapshot{}, at(time.Second))
	k.mu.Unlock()
	p.reserve(&b, req, clockAt(at(time.Second)), 0)
	p.cancel(&a, clockAt(at(time.Second)))
	if q := k.requests.queued; q != 1 {
		t.Errorf("queued = %v after the first caller gave up, want 1: the second still waits", q)
	}
}
