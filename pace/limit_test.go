package pace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
)

// busyServer serves at most capacity requests at a time, each for service,
// and answers any request above them at once with Anthropic's overload: a
// 529 and an overloaded_error body, no rate-limit header. It keeps time
// with the time package: it belongs in a synctest bubble.
type busyServer struct {
	service time.Duration
	stream  bool // answer a text/event-stream, served as the body is read
	state   int  // when positive, every answer states this limit in the IETF fields

	mu       sync.Mutex
	capacity int
	busy     int
	peak     int // the most requests served at once
	sent     int
	refused  int
}

func (s *busyServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	s.mu.Lock()
	s.sent++
	if s.busy >= s.capacity {
		s.refused++
		s.mu.Unlock()
		return overloadedResponse(req), nil
	}
	s.busy++
	s.peak = max(s.peak, s.busy)
	s.mu.Unlock()
	if s.stream {
		h := http.Header{"Content-Type": {"text/event-stream"}}
		stateLimitIn(h, s.state)
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: &servedStream{s: s, left: s.service}, Request: req}, nil
	}
	time.Sleep(s.service)
	s.free()
	h := http.Header{"Content-Type": {"application/json"}}
	stateLimitIn(h, s.state)
	return &http.Response{StatusCode: http.StatusOK, Header: h,
		Body: io.NopCloser(strings.NewReader(`{"type":"message"}`)), Request: req}, nil
}

// stateLimitIn states a concurrency limit of n in h, as the IETF fields
// do; nothing when n is not positive.
func stateLimitIn(h http.Header, n int) {
	if n > 0 {
		h.Set("RateLimit-Policy", fmt.Sprintf(`"conc";q=%d;qu="concurrent-requests"`, n))
		h.Set("RateLimit", `"conc";r=0`)
	}
}

func (s *busyServer) free() {
	s.mu.Lock()
	s.busy--
	s.mu.Unlock()
}

func (s *busyServer) setCapacity(n int) {
	s.mu.Lock()
	s.capacity = n
	s.mu.Unlock()
}

func (s *busyServer) counts() (sent, refused, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.refused, s.peak
}

// servedStream is an event stream that occupies its server until it has
// been read to the end: each Read takes a tenth of the service time.
type servedStream struct {
	s     *busyServer
	left  time.Duration
	ended bool
}

func (b *servedStream) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.end()
		return 0, io.EOF
	}
	step := b.s.service / 10
	time.Sleep(step)
	b.left -= step
	return copy(p, "data: {}\n\n"), nil
}

func (b *servedStream) Close() error { b.end(); return nil }

func (b *servedStream) end() {
	if !b.ended {
		b.ended = true
		b.s.free()
	}
}

func overloadedResponse(req *http.Request) *http.Response {
	return &http.Response{StatusCode: 529, Header: http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)),
		Request: req}
}

// llmTransport is the LLM recipe's Transport over base, with p.
func llmTransport(base http.RoundTripper, p *Pacer) *retry.Transport {
	return &retry.Transport{Base: base, Pacer: p, Replayable: func(*http.Request) bool { return true },
		Policy: retry.Policy{MaxAttempts: 5, AttemptTimeout: 2 * time.Minute, Deadline: 5 * time.Minute,
			Retryable: retry.LLMRetryable, RetryAfterJitter: 0.1}}
}

func post(ctx context.Context, tr http.RoundTripper) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.anthropic.example/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", "sk-test")
	return tr.RoundTrip(req)
}

// callers runs n callers that call tr one call after another until d has
// passed, and returns the calls that failed and those that succeeded.
func callers(tr http.RoundTripper, n int, d time.Duration) (failed, ok int) {
	end := time.Now().Add(d)
	var nf, nok atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) {
				resp, err := post(context.Background(), tr)
				if err != nil || resp.StatusCode != http.StatusOK {
					nf.Add(1)
				} else {
					nok.Add(1)
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	return int(nf.Load()), int(nok.Load())
}

// limitOf returns the concurrency limit the Pacer learned for the test's
// key, or 0.
func limitOf(t *testing.T, p *Pacer) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.example/v1/messages", nil)
	req.Header.Set("X-Api-Key", "sk-test")
	k := p.lookup(req)
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conc == nil {
		return 0
	}
	return k.conc.limit
}

// TestLimitLearnsCapacity: 50 callers against a server that takes 10 at a
// time fail no call; after the start, almost nothing is refused and the
// limit sits at the capacity. When the capacity halves, the limit follows.
func TestLimitLearnsCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &busyServer{capacity: 10, service: 500 * time.Millisecond}
		p := &Pacer{}
		tr := llmTransport(srv, p)
		if failed, _ := callers(tr, 50, 20*time.Second); failed != 0 {
			t.Errorf("%d calls failed while the limit was learned, want none", failed)
		}
		if l := limitOf(t, p); l < 9 || l > 11 {
			t.Errorf("limit = %d after 20 s at a capacity of 10, want 9 to 11", l)
		}
		sent0, refused0, _ := srv.counts()
		failed, ok := callers(tr, 50, 30*time.Second)
		sent, refused, _ := srv.counts()
		if failed != 0 {
			t.Errorf("%d calls failed at the learned limit, want none", failed)
		}
		if share := float64(refused-refused0) / float64(sent-sent0); share > 0.02 {
			t.Errorf("%.1f%% of %d attempts refused at the learned limit, want at most 2%%", 100*share, sent-sent0)
		}
		if ok < 570 { // 30 s of 10 slots of 500 ms: 600
			t.Errorf("%d calls succeeded in 30 s, want at least 570 of the 600 the server can serve", ok)
		}

		srv.setCapacity(5)
		if failed, _ := callers(tr, 50, 20*time.Second); failed != 0 {
			t.Errorf("%d calls failed after the capacity halved, want none", failed)
		}
		if l := limitOf(t, p); l < 4 || l > 6 {
			t.Errorf("limit = %d 20 s after the capacity fell to 5, want 4 to 6", l)
		}
	})
}

// TestLimitNothingBeforeOverload: answers without overload leave a key
// unknown, so the Pacer keeps no state and takes no lock for it; a 529
// makes it learn a limit.
func TestLimitNothingBeforeOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &busyServer{capacity: 100, service: time.Millisecond}
		p := &Pacer{}
		tr := llmTransport(srv, p)
		callers(tr, 10, time.Second)
		if m := p.keys.Load(); m != nil {
			t.Fatalf("the Pacer holds %d keys after answers that teach nothing, want none", len(*m))
		}
		if p.limited.Load() {
			t.Fatal("the Pacer has a concurrency limit with no overload seen")
		}
		req, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.example/v1/messages", nil)
		r, _ := p.Reserve(req, 1, nil, time.Minute)
		if _, ok := r.(*unknown); !ok {
			t.Fatalf("Reserve returned a %T for an unlearned key, want the stateless *unknown", r)
		}
		ok := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
		if n := testing.AllocsPerRun(100, func() {
			r, _ := p.Reserve(req, 1, nil, time.Minute)
			r.Done(req, ok, nil, nil, 0, time.Minute)
		}); n != 0 {
			t.Errorf("an unlearned key's attempt allocates %v times, want 0", n)
		}

		srv.setCapacity(0)
		resp, err := post(context.Background(), &retry.Transport{Base: srv, Pacer: p, Policy: retry.Policy{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if l := limitOf(t, p); l != 1 {
			t.Errorf("limit = %d after the first 529, want 1 (slow start)", l)
		}
	})
}

// TestLimitQueueFirstComeFirstServed: requests beyond the limit get their
// slots in the order they asked.
func TestLimitQueueFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pacer{}
		k := stateLimit(p, 1)
		var order []int
		var mu sync.Mutex
		gate := make(chan struct{})
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Header.Get("N") == "0" {
				<-gate // holds the only slot until every other caller waits
			}
			mu.Lock()
			order = append(order, len(order))
			mu.Unlock()
			h := http.Header{}
			stateLimitIn(h, 1) // the server keeps stating it, so that it holds
			return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: req}, nil
		})
		tr := &retry.Transport{Base: base, Pacer: p}
		var wg sync.WaitGroup
		var got []string
		for i := range 5 {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, "https://api.anthropic.example/v1/models", nil)
				req.Header.Set("X-Api-Key", "sk-test")
				req.Header.Set("N", string(rune('0'+i)))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
				mu.Lock()
				got = append(got, req.Header.Get("N"))
				mu.Unlock()
			})
			synctest.Wait() // caller i is in flight, or waits, before caller i+1 asks
		}
		if q := queued(k); q != 4 {
			t.Fatalf("%d requests wait for the slot, want 4", q)
		}
		close(gate)
		wg.Wait()
		if want := "01234"; strings.Join(got, "") != want {
			t.Errorf("calls ended in the order %s, want %s", strings.Join(got, ""), want)
		}
	})
}

// stateLimit gives the test key of p a limit of n, as a server that states
// it would, and returns the key.
func stateLimit(p *Pacer, n int) *paceKey {
	req, _ := http.NewRequest(http.MethodGet, "https://api.anthropic.example/", nil)
	req.Header.Set("X-Api-Key", "sk-test")
	k := p.add(req, 0)
	k.mu.Lock()
	k.conc = newLimiter()
	k.conc.state(float64(n), 0)
	k.mu.Unlock()
	k.limited.Store(true)
	p.limited.Store(true)
	return k
}

func queued(k *paceKey) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.conc.queue)
}

func inflight(k *paceKey) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.conc.inflight
}

// TestLimitWaitIsAPacingWait: a wait for a slot is reported to OnWait and
// LogWaits, counts as the Pacer's in Outcome.Waited, ends with the
// caller's cancel (the next caller gets the slot), and ends the call with
// ReasonDeadline when the Deadline comes first, or at once when the
// expected wait is longer than the call has left.
func TestLimitWaitIsAPacingWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs strings.Builder
		var events []Event
		var mu sync.Mutex
		p := &Pacer{OnWait: func(e Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			LogWaits(slog.New(slog.NewTextHandler(&logs, nil)), time.Millisecond)(e)
		}}
		k := stateLimit(p, 1)
		k.conc.hold = int64(10 * time.Second) // a slot is held 10 s, as lately measured
		release := make(chan struct{})
		var sent atomic.Int64
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if sent.Add(1) == 1 {
				<-release
			}
			h := http.Header{}
			stateLimitIn(h, 1)
			return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: req}, nil
		})
		var outcomes []retry.Outcome
		tr := &retry.Transport{Base: base, Pacer: p, Policy: retry.Policy{Deadline: time.Minute, OnDone: func(o retry.Outcome) {
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		}}}
		get := func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.anthropic.example/v1/models", nil)
			req.Header.Set("X-Api-Key", "sk-test")
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			return err
		}
		first := make(chan error, 1)
		go func() { first <- get(context.Background()) }()
		synctest.Wait() // the first call holds the slot

		// A caller that cancels while it waits leaves the queue.
		ctx, cancel := context.WithCancel(context.Background())
		second := make(chan error, 1)
		go func() { second <- get(ctx) }()
		synctest.Wait()
		if q := queued(k); q != 1 {
			t.Fatalf("%d requests wait, want 1", q)
		}
		time.Sleep(3 * time.Second)
		cancel()
		if err := <-second; !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled wait for a slot returned %v, want context.Canceled", err)
		}
		if q := queued(k); q != 0 {
			t.Errorf("%d requests wait after the cancel, want 0", q)
		}

		// A caller whose Deadline comes before the slot ends with ReasonDeadline.
		short := &retry.Transport{Base: base, Pacer: p, Policy: retry.Policy{Deadline: 30 * time.Second}}
		req, _ := http.NewRequest(http.MethodGet, "https://api.anthropic.example/v1/models", nil)
		req.Header.Set("X-Api-Key", "sk-test")
		began := time.Now()
		_, err := short.RoundTrip(req)
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline {
			t.Errorf("a wait past the Deadline returned %v, want a *retry.Error with ReasonDeadline", err)
		}
		if d := time.Since(began); d != 30*time.Second {
			t.Errorf("the call waited %v, want its Deadline, 30s", d)
		}

		// One whose expected wait (two ahead of it, 10 s a slot) is longer
		// than its Deadline ends at once.
		third := make(chan error, 1)
		go func() { third <- get(context.Background()) }()
		synctest.Wait()
		tiny := &retry.Transport{Base: base, Pacer: p, Policy: retry.Policy{Deadline: 15 * time.Second}}
		began = time.Now()
		_, err = tiny.RoundTrip(req)
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || time.Since(began) != 0 {
			t.Errorf("a wait expected to outlast the Deadline returned %v after %v, want ReasonDeadline at once", err, time.Since(began))
		}
		if n := sent.Load(); n != 1 {
			t.Errorf("%d requests sent while the slot was held, want 1", n)
		}

		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-third; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(events) == 0 || !events[0].Slot || events[0].Delay != 10*time.Second {
			t.Errorf("events = %+v, want the first a slot wait of 10s (one ahead, 10 s a slot)", events)
		}
		if !strings.Contains(logs.String(), "slot=true") {
			t.Errorf("LogWaits wrote %q, want slot=true", logs.String())
		}
		var waited bool
		for _, o := range outcomes {
			waited = waited || o.Waited > 0
		}
		if !waited {
			t.Errorf("outcomes = %+v, want a slot wait counted in Waited", outcomes)
		}
	})
}

// TestLimitEventStreamHoldsItsSlot: a streamed answer holds its slot until
// its body is read to the end, or closed.
func TestLimitEventStreamHoldsItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &busyServer{capacity: 1, service: time.Second, stream: true, state: 1}
		p := &Pacer{}
		k := stateLimit(p, 1)
		tr := llmTransport(srv, p)
		resp, err := post(context.Background(), tr)
		if err != nil {
			t.Fatal(err)
		}
		if n := inflight(k); n != 1 {
			t.Fatalf("%d slots held while the stream is open, want 1", n)
		}
		second := make(chan error, 1)
		go func() {
			resp, err := post(context.Background(), tr)
			if err == nil {
				_ = resp.Body.Close()
			}
			second <- err
		}()
		synctest.Wait()
		if q := queued(k); q != 1 {
			t.Fatalf("%d requests wait while the stream is open, want 1", q)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if q := queued(k); q != 0 {
			t.Errorf("%d requests wait after the stream ended, want 0", q)
		}
		_ = resp.Body.Close()
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		if _, refused, peak := srv.counts(); refused != 0 || peak != 1 {
			t.Errorf("the server refused %d and served %d at once, want 0 and 1", refused, peak)
		}
		if n := inflight(k); n != 0 {
			t.Errorf("%d slots held after both streams ended, want 0", n)
		}
	})
}

// TestLimitFromOverloadedEvent: an overloaded_error event at the start of
// a 200 stream, which Transport.Stream retries unseen, teaches the limit
// as a 529 does.
func TestLimitFromOverloadedEvent(t *testing.T) {
	var n atomic.Int64
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		body := "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		if n.Add(1) == 1 {
			body = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
		}
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	})
	p := &Pacer{}
	pol, _ := fakeTime(retry.Policy{MaxAttempts: 3})
	tr := &retry.Transport{Base: base, Pacer: p, Policy: pol, Stream: &retry.Stream{Event: retry.LLMEvent},
		Replayable: func(*http.Request) bool { return true }}
	resp, err := post(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(b), "hi") || n.Load() != 2 {
		t.Fatalf("got %q after %d attempts, want the second attempt's answer", b, n.Load())
	}
	if l := limitOf(t, p); l != 2 {
		t.Errorf("limit = %d after an overloaded_error event and a success, want 2 (slow start)", l)
	}
}

// TestLimitStatedByServer: the IETF quota of unit concurrent-requests sets
// the limit at once, and the Pacer never has more in flight.
func TestLimitStatedByServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &busyServer{capacity: 3, service: 500 * time.Millisecond}
		stated := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := srv.RoundTrip(req)
			if resp != nil {
				resp.Header.Set("RateLimit-Policy", `"conc";q=3;qu="concurrent-requests"`)
				resp.Header.Set("RateLimit", `"conc";r=0`)
			}
			return resp, err
		})
		p := &Pacer{}
		tr := llmTransport(stated, p)
		resp, err := post(context.Background(), tr) // the first answer states the limit
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if l := limitOf(t, p); l != 3 {
			t.Fatalf("limit = %d after the server stated 3, want 3", l)
		}
		if failed, _ := callers(tr, 20, 10*time.Second); failed != 0 {
			t.Errorf("%d calls failed, want none", failed)
		}
		if _, refused, peak := srv.counts(); refused != 0 || peak != 3 {
			t.Errorf("the server refused %d and served %d at once, want 0 and 3", refused, peak)
		}
	})
}

// TestLimitRetryAfterHoldsTheKey: a 529 with Retry-After holds every caller
// of the key, and teaches the limit too.
func TestLimitRetryAfterHoldsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				resp := overloadedResponse(req)
				resp.Header.Set("Retry-After", "7")
				return resp, nil
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		})
		p := &Pacer{}
		tr := llmTransport(base, p)
		began := time.Now()
		resp, err := post(context.Background(), tr)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if d := time.Since(began); d < 6*time.Second || d > 8*time.Second {
			t.Errorf("the call took %v, want the Retry-After of 7s, jittered", d)
		}
		if l := limitOf(t, p); l != 2 {
			t.Errorf("limit = %d after a 529 and a success, want 2 (slow start)", l)
		}
		began = time.Now()
		resp, err = post(context.Background(), tr)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if d := time.Since(began); d != 0 {
			t.Errorf("a call after the hold waited %v, want none", d)
		}
	})
}

// TestLimitOverloadedDecides: Pacer.Overloaded says which statuses are
// overload; one that says none keeps every key free of a limit.
func TestLimitOverloadedDecides(t *testing.T) {
	for _, tt := range []struct {
		name       string
		overloaded func(int) bool
		status     int
		want       bool
	}{
		{"a 503 by default", nil, 503, true},
		{"a 529 by default", nil, 529, true},
		{"a 500 by default", nil, 500, false},
		{"a 503 when only 529 says it", func(code int) bool { return code == 529 }, 503, false},
		{"a 529 when nothing says it", func(int) bool { return false }, 529, false},
	} {
		p := &Pacer{Overloaded: tt.overloaded}
		resp := overloadedResponse(nil)
		resp.StatusCode = tt.status
		tr := &retry.Transport{Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp.Request = req
			return resp, nil
		}), Pacer: p, Policy: retry.Policy{MaxAttempts: 1}}
		r, err := post(context.Background(), tr)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Body.Close()
		if got := limitOf(t, p) > 0; got != tt.want {
			t.Errorf("%s: a limit learned = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLimitStatedOnlyWhileStated: a limit the server stated holds while it
// states it; once answers come without it, the limit is learned again.
func TestLimitStatedOnlyWhileStated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &busyServer{capacity: 100, service: 100 * time.Millisecond, state: 2}
		p := &Pacer{}
		tr := llmTransport(srv, p)
		callers(tr, 10, 5*time.Second)
		if l := limitOf(t, p); l != 2 {
			t.Fatalf("limit = %d while the server states 2, want 2", l)
		}
		srv.state = 0
		callers(tr, 10, 10*time.Second)
		if l := limitOf(t, p); l <= 2 {
			t.Errorf("limit = %d after the server stopped stating it, with room for 100, want it to grow", l)
		}
	})
}

// TestLimitTimesSlotsSanely: a slot held for an hour (a stream kept open)
// or by a clock that stepped back teaches nothing of how long slots are
// held, and the pause after a refusal never passes a second; an answer
// that is neither a success nor overload does not raise the limit.
func TestLimitTimesSlotsSanely(t *testing.T) {
	c := newLimiter()
	c.inflight = 2
	c.release(0, int64(time.Hour), true)
	c.release(int64(time.Second), 0, true)
	if c.hold != 0 {
		t.Errorf("hold = %v after an hour-long slot and one timed backwards, want none learned", time.Duration(c.hold))
	}
	c.hold = int64(10 * time.Minute) // as a pre-clamp sample could have made it
	c.seen = true
	c.inflight = 1
	var tk paceTicket
	c.occupy(&tk, 0)
	c.refused(&tk, 0)
	if c.cool > int64(time.Second) {
		t.Errorf("the pause after a refusal ends at %v, want at most 1s", time.Duration(c.cool))
	}

	p := &Pacer{}
	k := stateLimit(p, 1) // one slot: every request fills it
	k.mu.Lock()
	k.conc.stated, k.conc.probing, k.conc.safe = false, true, 1
	before := k.conc.limit
	k.mu.Unlock()
	for range 20 {
		req, _ := http.NewRequest(http.MethodGet, "https://api.anthropic.example/", nil)
		req.Header.Set("X-Api-Key", "sk-test")
		r, _ := p.Reserve(req, 1, nil, time.Minute)
		r.(retry.Queued).Turn(nil, time.Minute)
		r.Done(req, &http.Response{StatusCode: 502, Header: http.Header{"X": {"y"}}, Body: http.NoBody}, nil, nil, 0, time.Minute)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conc.limit != before || k.conc.safe != 1 || k.conc.inflight != 0 {
		t.Errorf("after 20 502s: limit %d (was %d), safe %d, %d in flight; want them unchanged and none in flight", k.conc.limit, before, k.conc.safe, k.conc.inflight)
	}
}
