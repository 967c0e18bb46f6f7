package pace

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrykit/retry"
)

// scriptedRT answers each request with the next header set of a script (the
// last one repeating) and status 200 unless the header set says otherwise
// through a "Status" entry. It counts the requests per host.
type scriptedRT struct {
	mu     sync.Mutex
	script []http.Header
	sent   map[string]int
	n      int
}

func (s *scriptedRT) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[string]int{}
	}
	s.sent[req.URL.Host]++
	h := s.script[min(s.n, len(s.script)-1)].Clone()
	s.n++
	code := http.StatusOK
	if v := h.Get("Status"); v != "" {
		code, _ = strconv.Atoi(v)
		h.Del("Status")
	}
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req}, nil
}

func (s *scriptedRT) count(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[host]
}

// openAIHeaders are OpenAI's request headers: limit per reset, none left.
func openAIHeaders(limit, remaining int, reset string) http.Header {
	return hdr("x-ratelimit-limit-requests", strconv.Itoa(limit),
		"x-ratelimit-remaining-requests", strconv.Itoa(remaining), "x-ratelimit-reset-requests", reset)
}

// pacedTransport returns a retry.Transport over base with a new Pacer, on fake
// time, and the waits the Pacer announced.
func pacedTransport(base http.RoundTripper, p retry.Policy) (*retry.Transport, *[]Event) {
	p, _ = fakeTime(p)
	var mu sync.Mutex
	events := new([]Event)
	pacer := &Pacer{OnWait: func(e Event) {
		mu.Lock()
		*events = append(*events, e)
		mu.Unlock()
	}}
	return &retry.Transport{Base: base, Policy: p, Pacer: pacer}, events
}

func get(t *testing.T, tr http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return resp, err
}

func TestTransportPacesFromHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script []http.Header
		want   []time.Duration // the waits of calls 2 to 4
	}{
		{
			name:   "openai, empty bucket: one a second",
			script: []http.Header{openAIHeaders(10, 0, "10s")},
			want:   []time.Duration{time.Second, time.Second, time.Second},
		},
		{
			name:   "openai, room left: no wait",
			script: []http.Header{openAIHeaders(10, 9, "1s")},
		},
		{
			name: "github window: waits for the reset",
			script: []http.Header{hdr("Date", "Thu, 01 Jan 2026 00:00:00 GMT", "x-ratelimit-limit", "60",
				"x-ratelimit-remaining", "1", "x-ratelimit-reset", strconv.FormatInt(pacerEpoch.Unix()+30, 10))},
			want: []time.Duration{31 * time.Second}, // a second for the rounding of a whole-second reset
		},
		{
			// A fixed window of 2 per 10 s whose server always says none
			// is left until it ends: each call waits for the next window.
			name:   "ietf: none left until t, q per w",
			script: []http.Header{hdr("RateLimit-Policy", `"p";q=2;w=10`, "RateLimit", `"p";r=0;t=10`)},
			want:   []time.Duration{11 * time.Second, 11 * time.Second, 11 * time.Second},
		},
		{
			name:   "headers absent on some responses change nothing",
			script: []http.Header{openAIHeaders(10, 0, "10s"), {}},
			want:   []time.Duration{time.Second, time.Second, time.Second},
		},
		{
			name: "conflicting formats on one response: OpenAI's names win",
			script: []http.Header{hdr("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "0",
				"x-ratelimit-reset-requests", "10s", "RateLimit-Policy", `"p";q=1000;w=1`, "RateLimit", `"p";r=1000;t=1`)},
			want: []time.Duration{time.Second, time.Second, time.Second},
		},
		{
			name:   "no headers: nothing learned, no wait",
			script: []http.Header{{}},
		},
		{
			name:   "hostile: a reset ten years away is not believed",
			script: []http.Header{openAIHeaders(10, 0, "87600h")},
		},
		{
			name:   "hostile: limit 0",
			script: []http.Header{openAIHeaders(0, 0, "1s")},
		},
		{
			name: "hostile, then sane: paces from the first sane response",
			script: []http.Header{openAIHeaders(10, -5, "1s"), hdr("x-ratelimit-limit-requests", "lots"),
				openAIHeaders(10, 0, "10s")},
			want: []time.Duration{time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, events := pacedTransport(&scriptedRT{script: tt.script}, retry.Policy{})
			for range 4 {
				if _, err := get(t, tr, "https://api.example.com/"); err != nil {
					t.Fatal(err)
				}
			}
			var got []time.Duration
			for _, e := range *events {
				got = append(got, e.Delay)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransportPacerRetryAfterHoldsEveryCaller(t *testing.T) {
	t.Parallel()
	rt := &scriptedRT{script: []http.Header{hdr("Status", "429", "Retry-After", "5"), {}}}
	var retries atomic.Int32
	tr, events := pacedTransport(rt, retry.Policy{MaxAttempts: 1, OnRetry: func(retry.Event) { retries.Add(1) }})
	if resp, err := get(t, tr, "https://api.example.com/"); err != nil || resp.StatusCode != 429 {
		t.Fatalf("first call: %v, %v; want the 429", resp, err)
	}
	// Another caller on the same key waits out the Retry-After.
	if _, err := get(t, tr, "https://api.example.com/"); err != nil {
		t.Fatal(err)
	}
	want := []Event{{Attempt: 1, Delay: 5 * time.Second, Host: "api.example.com", RetryAfter: true}}
	if diff := cmp.Diff(want, *events); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if n := retries.Load(); n != 0 {
		t.Errorf("OnRetry called %d times for a pacing wait, want 0", n)
	}
	// Another host is not held.
	if _, err := get(t, tr, "https://other.example.com/"); err != nil {
		t.Fatal(err)
	}
	if len(*events) != 1 {
		t.Errorf("another host waited: %+v", (*events)[1:])
	}
}

func TestTransportPacerDeadline(t *testing.T) {
	t.Parallel()
	// A Retry-After of an hour on a call whose Deadline is a minute.
	rt := &scriptedRT{script: []http.Header{hdr("Status", "429", "Retry-After", "3600")}}
	tr, events := pacedTransport(rt, retry.Policy{MaxAttempts: 1})
	_, _ = get(t, tr, "https://api.example.com/")
	_, err := get(t, tr, "https://api.example.com/")
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonDeadline || e.Attempts != 0 {
		t.Fatalf("err = %v, want *retry.Error{retry.ReasonDeadline, Attempts: 0}", err)
	}
	if n := rt.count("api.example.com"); n != 1 {
		t.Errorf("%d requests sent, want 1", n)
	}
	if len(*events) != 0 {
		t.Errorf("a wait that cannot end before the Deadline was announced: %+v", *events)
	}
	// The caller's context deadline, sooner than the Deadline, binds too.
	tr.Policy.Deadline = 2 * time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/", nil)
	if _, err := tr.RoundTrip(req); !errors.As(err, &e) || e.Reason != retry.ReasonDeadline {
		t.Fatalf("err = %v, want *retry.Error{retry.ReasonDeadline}", err)
	}
}

func TestTransportPacerCancelEndsWait(t *testing.T) {
	t.Parallel()
	// Real time: the wait is an hour long, the cancel comes at once.
	rt := &scriptedRT{script: []http.Header{hdr("Status", "429", "Retry-After", "3600"), {}}}
	tr := &retry.Transport{Base: rt, Policy: retry.Policy{MaxAttempts: 1, Deadline: 2 * time.Hour}, Pacer: &Pacer{}}
	_, _ = get(t, tr, "https://api.example.com/")
	ctx, cancel := context.WithCancel(context.Background())
	tr.Pacer.(*Pacer).OnWait = func(Event) { cancel() }
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/", nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled wait took %v", d)
	}
	// The cancelled caller gave its place back: the block is all that is left.
	k := tr.Pacer.(*Pacer).lookup(req)
	if k == nil || k.inflight != 0 {
		t.Errorf("key after a cancelled wait: %+v, want nothing in flight", k)
	}
}

func TestTransportPacerKeysApart(t *testing.T) {
	t.Parallel()
	// One key's server sends garbage and an empty bucket; the other's is
	// healthy. Garbage on one never stops the other.
	rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		h := openAIHeaders(10, 9, "1s")
		if req.URL.Host == "bad.example.com" {
			h = hdr("x-ratelimit-limit-requests", "10", "x-ratelimit-remaining-requests", "0",
				"x-ratelimit-reset-requests", "10s", "RateLimit", `"x";r=-1`, "Retry-After", "garbage")
		}
		return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody}, nil
	})
	tr, events := pacedTransport(rt, retry.Policy{})
	for range 3 {
		for _, host := range []string{"bad.example.com", "good.example.com"} {
			if _, err := get(t, tr, "https://"+host+"/"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range *events {
		if e.Host != "bad.example.com" {
			t.Errorf("a healthy key waited: %+v", e)
		}
	}
	if len(*events) != 2 {
		t.Errorf("the bad key waited %d times, want 2", len(*events))
	}
}

func TestTransportPacerErrorFreesSlot(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if n.Add(1) == 2 {
			return nil, errors.New("connection reset by peer")
		}
		return &http.Response{StatusCode: 200, Header: openAIHeaders(10, 9, "1s"), Body: http.NoBody}, nil
	})
	tr, _ := pacedTransport(rt, retry.Policy{MaxAttempts: 1})
	_, _ = get(t, tr, "https://api.example.com/")
	if _, err := get(t, tr, "https://api.example.com/"); err == nil {
		t.Fatal("want the base's error")
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	if k := tr.Pacer.(*Pacer).lookup(req); k == nil || k.inflight != 0 {
		t.Errorf("after a failed attempt: %+v, want nothing in flight", k)
	}
}

func TestTransportPacerIgnoresRetryAfterBeyondADay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
	}{
		{name: "ten years in seconds", value: "315360000"},
		{name: "a date ten years on", value: "Sat, 01 Jan 2036 00:00:00 GMT"},
		{name: "garbage", value: "soon"},
		{name: "negative", value: "-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := &scriptedRT{script: []http.Header{hdr("Status", "429", "Retry-After", tt.value), {}}}
			tr, events := pacedTransport(rt, retry.Policy{MaxAttempts: 1})
			_, _ = get(t, tr, "https://api.example.com/")
			if _, err := get(t, tr, "https://api.example.com/"); err != nil {
				t.Fatalf("a second caller failed: %v", err)
			}
			if len(*events) != 0 {
				t.Errorf("a Retry-After of %q held the key: %+v", tt.value, *events)
			}
		})
	}
}

// TestTransportNilPacer: a nil *Pacer in a Transport, which the Transport
// sees as a Pacer that is not nil, paces nothing and breaks nothing.
func TestTransportNilPacer(t *testing.T) {
	t.Parallel()
	var p *Pacer
	tr := &retry.Transport{Base: &scriptedRT{script: []http.Header{openAIHeaders(10, 0, "10s")}}, Pacer: p}
	for range 3 {
		if _, err := get(t, tr, "https://api.example.com/"); err != nil {
			t.Fatal(err)
		}
	}
}
