package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

func TestHostileRetryAfterNeverSleepsPastTheDeadline(t *testing.T) {
	start := retrytest.NewFakeTime().Clock.Now()
	tests := []struct {
		name, key, value string
		wantSleeps       []time.Duration // nil: no retry, the 503 comes back at once
	}{
		{name: "malformed", key: "Retry-After", value: "soon", wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "negative", key: "Retry-After", value: "-5", wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "exponent", key: "Retry-After", value: "1e3", wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "hex", key: "Retry-After", value: "0x10", wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "NaN", key: "Retry-After", value: "NaN", wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "Inf", key: "Retry-After", value: "Inf", wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "past date", key: "Retry-After", value: "Wed, 21 Oct 2015 07:28:00 GMT",
			wantSleeps: []time.Duration{100 * time.Millisecond}},
		{name: "30 digits", key: "Retry-After", value: "123456789012345678901234567890"},
		{name: "Unix timestamp", key: "Retry-After", value: "1700000000"},
		{name: "exactly the time left", key: "Retry-After", value: "10"},
		{name: "30 digits of ms", key: "Retry-After-Ms", value: "123456789012345678901234567890"},
		{name: "padded", key: "Retry-After", value: " 3 ", wantSleeps: []time.Duration{3 * time.Second}},
		{name: "seven seconds", key: "Retry-After", value: "7", wantSleeps: []time.Duration{7 * time.Second}},
		{name: "date in 5s", key: "Retry-After", value: start.Add(5 * time.Second).Format(http.TimeFormat),
			wantSleeps: []time.Duration{5 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := retrytest.NewServer(t, retrytest.Status(503, tt.key, tt.value), retrytest.Status(200))
			p, ft := fakePolicy(retry.Policy{MaxAttempts: 3, Deadline: 10 * time.Second,
				Base: 100 * time.Millisecond, Cap: time.Second})
			resp, err := retry.NewTransport(newBase(t), p).RoundTrip(mustRequest(t, "GET", s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if diff := cmp.Diff(tt.wantSleeps, ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			wantStatus := map[bool]int{true: 503, false: 200}[tt.wantSleeps == nil]
			if resp.StatusCode != wantStatus || s.Requests() != 1+len(tt.wantSleeps) {
				t.Errorf("got %d after %d requests, want %d", resp.StatusCode, s.Requests(), wantStatus)
			}
			if ft.Clock.Since(start) > p.Deadline {
				t.Errorf("fake time %v past the Deadline %v", ft.Clock.Since(start), p.Deadline)
			}
		})
	}
}

func TestHostileServerGetsAtMostMaxAttemptsCalls(t *testing.T) {
	steps := map[string]retrytest.Step{
		"503 x-should-retry": retrytest.Status(503, "X-Should-Retry", "true", "Retry-After", "0"),
		"429":                retrytest.Status(429, "Retry-After-Ms", "0"),
		"reset":              {Reset: true},
		"reset mid-body":     {Status: 503, ResetAfter: 5},
		"502 and close":      {Status: 502, Close: true},
	}
	for name, st := range steps {
		for _, method := range []string{"GET", "POST"} {
			t.Run(name+" "+method, func(t *testing.T) {
				t.Parallel()
				s := retrytest.NewServer(t, st)
				c := &counting{base: newBase(t)}
				p, _ := fakePolicy(retry.Policy{MaxAttempts: 3})
				req := mustRequest(t, method, s.URL, []byte("body"))
				req.Header.Set("Idempotency-Key", "k")
				resp, err := retry.NewTransport(c, p).RoundTrip(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if c.calls.Load() != 3 {
					t.Errorf("%d calls, want MaxAttempts = 3", c.calls.Load())
				}
				if c.opened.Load() != c.closed.Load() {
					t.Errorf("%d bodies opened, %d closed", c.opened.Load(), c.closed.Load())
				}
			})
		}
	}
}

func TestDiscardedBodiesAreReadAtMost64KiB(t *testing.T) {
	steps := map[string]retrytest.Step{
		"1 GiB":             {Status: 503, BodySize: 1 << 30},
		"1 GiB dribbled":    {Status: 503, BodySize: 1 << 30, Dribble: time.Millisecond},
		"reset after 1 MiB": {Status: 503, ResetAfter: 1 << 20},
		"64 KiB + 1":        {Status: 503, BodySize: 64<<10 + 1},
	}
	for name, st := range steps {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := retrytest.NewServer(t, st)
			c := &counting{base: newBase(t)}
			p, _ := fakePolicy(retry.Policy{MaxAttempts: 3, AttemptTimeout: 5 * time.Second})
			begin := time.Now()
			resp, err := retry.NewTransport(c, p).RoundTrip(mustRequest(t, "GET", s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close() // unread
			if got := c.read.Load(); got > 2*64<<10 {
				t.Errorf("read %d bytes from 2 discarded responses, want at most 2 x 64 KiB", got)
			}
			if took := time.Since(begin); took > 3*time.Second {
				t.Errorf("took %v", took)
			}
			if c.calls.Load() != 3 || c.opened.Load() != c.closed.Load() {
				t.Errorf("%d calls, %d bodies opened, %d closed", c.calls.Load(), c.opened.Load(), c.closed.Load())
			}
		})
	}
}

func TestDrainOfAStalledBodyEndsWithTheAttemptTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s := retrytest.NewServer(t, retrytest.Step{Status: 503, BodySize: 1 << 30, Dribble: time.Hour},
		retrytest.Step{Status: 503, Body: "x", Stall: true}, retrytest.Status(503))
	p, _ := fakePolicy(retry.Policy{MaxAttempts: 3, AttemptTimeout: timeout})
	begin := time.Now()
	resp, err := retry.NewTransport(newBase(t), p).RoundTrip(mustRequest(t, "GET", s.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Two drains stalled up to their attempt timeouts: far less than the
	// hour the server would take.
	if took := time.Since(begin); took < 2*timeout || took > 3*time.Second {
		t.Errorf("took %v, want about 2 x %v", took, timeout)
	}
	if resp.StatusCode != 503 || s.Requests() != 3 {
		t.Errorf("got %d after %d requests, want 503 after 3", resp.StatusCode, s.Requests())
	}
}

// oddBase answers with a response no well-behaved server would send.
type oddBase struct {
	resp func(req *http.Request) (*http.Response, error)
}

func (b oddBase) RoundTrip(req *http.Request) (*http.Response, error) { return b.resp(req) }

func TestBrokenResponsesNeverPanic(t *testing.T) {
	body := func() io.ReadCloser { return io.NopCloser(strings.NewReader("x")) }
	bases := map[string]func(*http.Request) (*http.Response, error){
		"nil body 503": func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 503}, nil },
		"nil body 200": func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 200}, nil },
		"status -1":    func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: -1, Body: body()}, nil },
		"status 0":     func(*http.Request) (*http.Response, error) { return &http.Response{Body: body()}, nil },
		"status 1000": func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 1000, Body: body()}, nil
		},
		"nil and nil": func(*http.Request) (*http.Response, error) { return nil, nil },
		"response+error": func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Body: body()}, io.EOF
		},
		"read error": func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Body: io.NopCloser(&failReader{})}, nil
		},
		"x-should-retry on 400": func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 400, Header: http.Header{"X-Should-Retry": {"true"},
				"Retry-After": {"-99999999999999999999", "5"}}, Body: body()}, nil
		},
	}
	for name, rt := range bases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := fakePolicy(retry.Policy{MaxAttempts: 3})
			resp, err := retry.NewTransport(oddBase{rt}, p).RoundTrip(mustRequest(t, "POST", "http://api.test/", []byte("b")))
			if (resp == nil) == (err == nil) {
				t.Fatalf("RoundTrip = %v, %v; want exactly one of them", resp, err)
			}
			if resp != nil && resp.Body != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("read failed") }

func TestSecretsNeverReachErrorsOrEvents(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.WriteHeader(503)
		_, _ = fmt.Fprintf(w, "%s %s", r.Header.Get("Authorization"), "secret-body")
	}
	steps := map[string]retrytest.Step{
		"echo 503":         {Func: echo},
		"reason phrase":    {Func: reasonPhrase},
		"reset":            {Reset: true},
		"reset mid-body":   {Status: 503, ResetAfter: 3},
		"hang":             {Hang: true},
		"huge Retry-After": retrytest.Status(429, "Retry-After", "1700000000"),
	}
	for name, st := range steps {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := retrytest.NewServer(t, st)
			var events []retry.Event
			p, _ := fakePolicy(retry.Policy{MaxAttempts: 3, AttemptTimeout: 50 * time.Millisecond,
				OnRetry: func(e retry.Event) { events = append(events, e) }})
			client := &http.Client{Transport: retry.NewTransport(newBase(t), p)}
			for _, method := range []string{"GET", "POST"} {
				req := mustRequest(t, method, s.URL, []byte("secret-body"))
				req.Header.Set("Authorization", "Bearer secret-token")
				req.Header.Set("Idempotency-Key", "k")
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				checkSecrets(t, err, events)
			}
			if name != "huge Retry-After" && len(events) == 0 {
				t.Error("no retry happened, so nothing was checked")
			}
		})
	}
}

// reasonPhrase answers 503 with the caller's credentials as the status
// line's text, as a reflecting server can.
func reasonPhrase(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	_, _ = fmt.Fprintf(buf, "HTTP/1.1 503 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", r.Header.Get("Authorization"))
	_ = buf.Flush()
}

// loopbackCases is how many random scripts TestTransportPropertiesOnLoopback
// plays on a real server.
const loopbackCases = 150

func TestTransportPropertiesOnLoopback(t *testing.T) {
	base := newBase(t)
	for i := range loopbackCases {
		if desc := runLoopbackCase(t, newRandSrc(1<<40+uint64(i)), base); t.Failed() {
			t.Fatalf("case %d failed: %s", i, desc)
		}
	}
	t.Logf("%d Transport cases on a loopback server", loopbackCases)
}

// loopbackSteps are the answers a loopback case draws from; notProcessed
// marks those that prove the server did not process the request.
var loopbackSteps = []struct {
	step         retrytest.Step
	notProcessed bool
}{
	{step: retrytest.Step{Body: "ok"}},
	{step: retrytest.Status(503)},
	{step: retrytest.Status(500, "X-Should-Retry", "true"), notProcessed: true},
	{step: retrytest.Status(502, "X-Should-Retry", "false")},
	{step: retrytest.Status(429, "Retry-After", "1"), notProcessed: true},
	{step: retrytest.Status(408)},
	{step: retrytest.Step{Status: 503, BodySize: 100 << 10}},
	{step: retrytest.Step{Reset: true}},
	{step: retrytest.Step{Status: 503, ResetAfter: 100}},
	{step: retrytest.Step{Status: 503, Close: true}},
}

// runLoopbackCase sends one random request through a Transport to a server
// playing a random script, and checks the invariants that hold whatever
// net/http does underneath.
func runLoopbackCase(t *testing.T, s src, base http.RoundTripper) string {
	kinds := make([]int, 1+s.intn(6))
	steps := make([]retrytest.Step, len(kinds))
	for i := range kinds {
		kinds[i] = s.intn(len(loopbackSteps))
		steps[i] = loopbackSteps[kinds[i]].step
		steps[i].Header = steps[i].Header.Clone()
		if steps[i].Header == nil {
			steps[i].Header = http.Header{}
		}
		steps[i].Header.Set("X-Step", fmt.Sprint(i))
	}
	tc := tCase{pc: genPolicy(s, []time.Duration{0, 5 * time.Second},
		[]time.Duration{0, time.Second, 10 * time.Second, time.Minute}),
		method: pick(s, "GET", "POST", "POST", "PUT"), key: pick(s, "", "Idempotency-Key")}
	desc := fmt.Sprintf("%s key %q, policy %+v (Retryable %s), steps %v", tc.method, tc.key, tc.pc.p, tc.pc.retryable, kinds)
	srv := retrytest.NewServer(t, steps...)
	r, p := newRecorder(&tc.pc)
	c := &counting{base: base}
	payload := []byte("secret-body payload")
	req := newCallerRequest(context.Background(), &tc, payload)
	req.URL, req.Host = mustRequest(t, "GET", srv.URL, nil).URL, ""
	before := snap(req)
	resp, err := retry.NewTransport(c, p).RoundTrip(req)
	if diff := cmp.Diff(before, snap(req), cmp.Comparer(func(a, b context.Context) bool { return a == b }),
		cmp.Comparer(func(a, b io.ReadCloser) bool { return a == b })); diff != "" {
		t.Errorf("caller's request changed (-before +after):\n%s", diff)
	}
	checkLoopbackLoop(t, &tc.pc, r, int(c.calls.Load()))
	checkSecrets(t, err, r.events)
	received := srv.Received()
	if (resp == nil) == (err == nil) {
		t.Fatalf("RoundTrip = %v, %v; want exactly one", resp, err)
	}
	var kept, returned int64
	if resp != nil {
		returned = 1
		if got, want := resp.Header.Get("X-Step"), fmt.Sprint(min(len(received), len(steps))-1); got != want {
			t.Errorf("returned the answer of step %s, want the last one, %s", got, want)
		}
		kept, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if c.opened.Load() != c.closed.Load() || c.read.Load()-kept > (c.opened.Load()-returned)*64<<10 {
		t.Errorf("%d bodies opened, %d closed; %d bytes read, %d of them by the caller",
			c.opened.Load(), c.closed.Load(), c.read.Load(), kept)
	}
	for i, rr := range received {
		if !bytes.Equal(rr.Body, payload) && steps[min(i, len(steps)-1)].ResetRequestAfter == 0 {
			t.Errorf("request %d carried %q, want %q", i+1, rr.Body, payload)
		}
		if i < len(received)-1 && !replayable(&tc) && !loopbackSteps[kinds[min(i, len(kinds)-1)]].notProcessed {
			t.Errorf("%s without a key sent again after answer %d", tc.method, kinds[min(i, len(kinds)-1)])
		}
	}
	return desc
}

// checkLoopbackLoop checks attempts, sleeps and Deadline of a loopback case,
// where hints are at most a second.
func checkLoopbackLoop(t *testing.T, pc *policyCase, r *recorder, calls int) {
	t.Helper()
	maxAttempts, _, deadline, base, cap := pc.resolved()
	sleeps := r.ft.Sleeps()
	if calls < 1 || calls > maxAttempts || len(sleeps) != calls-1 || len(r.events) != len(sleeps) {
		t.Errorf("%d calls, %d sleeps, %d events; MaxAttempts %d", calls, len(sleeps), len(r.events), maxAttempts)
	}
	if el := r.ft.Clock.Since(r.start); el > deadline {
		t.Errorf("elapsed %v past the Deadline %v", el, deadline)
	}
	for i, d := range sleeps {
		if d < 0 || d > max(bound(i+1, base, cap), jittered(time.Second, pc.p.RetryAfterJitter)) {
			t.Errorf("sleep %d = %v, bound %v", i+1, d, bound(i+1, base, cap))
		}
	}
}

func TestHTTP2StreamResetsAreRetriedOnlyWhenReplayable(t *testing.T) {
	tests := []struct {
		name         string
		method, key  string
		wantRequests int
		wantStatus   int // 0: an error
	}{
		{name: "GET", method: "GET", wantRequests: 3, wantStatus: 200},
		{name: "POST with a key", method: "POST", key: "k", wantRequests: 3, wantStatus: 200},
		{name: "bare POST", method: "POST", wantRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := retrytest.NewTLSServer(t, retrytest.Step{Reset: true},
				retrytest.Step{Status: 503, ResetAfter: 10}, retrytest.Step{Body: "ok"})
			p, _ := fakePolicy(retry.Policy{MaxAttempts: 3})
			req := mustRequest(t, tt.method, s.URL, []byte("secret-body"))
			if tt.key != "" {
				req.Header.Set("Idempotency-Key", tt.key)
			}
			resp, err := retry.NewTransport(s.Client().Transport, p).RoundTrip(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			got := s.Received()
			if status != tt.wantStatus || len(got) != tt.wantRequests {
				t.Fatalf("status %d (%v) after %d requests, want %d after %d", status, err, len(got), tt.wantStatus, tt.wantRequests)
			}
			for i, r := range got {
				if r.Proto != "HTTP/2.0" || string(r.Body) != "secret-body" {
					t.Errorf("request %d: %s with body %q", i+1, r.Proto, r.Body)
				}
			}
		})
	}
}
