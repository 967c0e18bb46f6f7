package retry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// An attempt whose timeout is already spent when it starts (the Deadline
// almost used up) fires its timer while the attempt is being set up. Under
// -race this once reported a data race between arming the timer and
// recording it.
func TestAttemptTimeoutFiringDuringSetup(t *testing.T) {
	p := retry.Policy{MaxAttempts: 3, AttemptTimeout: time.Nanosecond,
		Sleep: func(context.Context, time.Duration) error { return nil }}
	for range 300 {
		calls := 0
		_, err := retry.Do(context.Background(), p, func(ctx context.Context) (int, error) {
			calls++
			<-ctx.Done()
			return 0, ctx.Err()
		})
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonMaxAttempts || calls != 3 {
			t.Fatalf("Do = %v after %d calls, want *Error{max_attempts} after 3", err, calls)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do = %v, want it to wrap the attempt's timeout", err)
		}
	}
}

// counting wraps a base RoundTripper and counts the calls and the response
// bodies it hands out and sees closed.
type counting struct {
	base   http.RoundTripper
	calls  atomic.Int64
	opened atomic.Int64
	closed atomic.Int64
	read   atomic.Int64 // bytes read from all bodies
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	resp, err := c.base.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		c.opened.Add(1)
		resp.Body = &countedBody{rc: resp.Body, c: c}
	}
	return resp, err
}

type countedBody struct {
	rc   io.ReadCloser
	c    *counting
	once sync.Once
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.c.read.Add(int64(n))
	return n, err
}

func (b *countedBody) Close() error {
	b.once.Do(func() { b.c.closed.Add(1) })
	return b.rc.Close()
}

// newBase returns an http.Transport of the test's own, closed when it ends.
func newBase(t *testing.T) *http.Transport {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// fakePolicy returns p with fake time plugged in.
func fakePolicy(p retry.Policy) (retry.Policy, *retrytest.FakeTime) {
	ft := retrytest.NewFakeTime()
	p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
	return p, ft
}

func TestRetryAfterAnHourWithATenSecondDeadlineReturnsAtOnce(t *testing.T) {
	s := retrytest.NewServer(t, retrytest.Step{Status: 429, Body: "slow down",
		Header: http.Header{"Retry-After": {"3600"}}})
	p, ft := fakePolicy(retry.Policy{Deadline: 10 * time.Second})
	client := &http.Client{Transport: retry.NewTransport(newBase(t), p)}
	resp, err := client.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || string(body) != "slow down" || err != nil {
		t.Errorf("got %d %q, %v; want 429 %q", resp.StatusCode, body, err, "slow down")
	}
	if s.Requests() != 1 || len(ft.Sleeps()) != 0 {
		t.Errorf("%d requests, sleeps %v; want 1 request and no sleep", s.Requests(), ft.Sleeps())
	}
}

func TestRetryAfterAsAUnixTimestampNeverSleeps(t *testing.T) {
	for _, h := range []string{"Retry-After", "Retry-After-Ms"} {
		t.Run(h, func(t *testing.T) {
			s := retrytest.NewServer(t, retrytest.Status(503, h, "1700000000"), retrytest.Status(200))
			p, ft := fakePolicy(retry.Policy{}) // the default one-minute Deadline
			resp, err := retry.NewTransport(newBase(t), p).RoundTrip(mustRequest(t, "GET", s.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 || s.Requests() != 1 || len(ft.Sleeps()) != 0 {
				t.Errorf("status %d after %d requests, sleeps %v; want 503 after 1, no sleep",
					resp.StatusCode, s.Requests(), ft.Sleeps())
			}
		})
	}
	t.Run("Do", func(t *testing.T) {
		p, ft := fakePolicy(retry.Policy{})
		hint, _ := retry.ParseRetryAfter(http.Header{"Retry-After": {"1700000000"}}, ft.Clock.Now())
		calls := 0
		_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
			calls++
			return 0, &retry.StatusError{StatusCode: 429, RetryAfter: hint}
		})
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || calls != 1 || len(ft.Sleeps()) != 0 {
			t.Errorf("Do = %v after %d calls, sleeps %v; want *Error{deadline} after 1, no sleep", err, calls, ft.Sleeps())
		}
	})
}

func mustRequest(t testing.TB, method, url string, body []byte) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPostResetMidBodyIsResentOnlyWhenReplayable(t *testing.T) {
	tests := []struct {
		name         string
		key          bool
		wantRequests int
	}{
		{name: "with Idempotency-Key: re-sent identical", key: true, wantRequests: 2},
		{name: "bare: not re-sent", key: false, wantRequests: 1},
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := retrytest.NewServer(t, retrytest.Step{ResetRequestAfter: 64 << 10}, retrytest.Status(200))
			p, _ := fakePolicy(retry.Policy{})
			client := &http.Client{Transport: retry.NewTransport(newBase(t), p)}
			req := mustRequest(t, "POST", s.URL, payload)
			if tt.key {
				req.Header.Set("Idempotency-Key", "k1")
			}
			resp, err := client.Do(req)
			if tt.key && err != nil {
				t.Fatalf("keyed POST failed: %v", err)
			}
			if !tt.key && err == nil {
				resp.Body.Close()
				t.Fatalf("bare POST got %d, want the connection error", resp.StatusCode)
			}
			if err == nil {
				resp.Body.Close()
			}
			got := s.Received()
			if len(got) != tt.wantRequests {
				t.Fatalf("server received %d requests, want %d", len(got), tt.wantRequests)
			}
			if !bytes.HasPrefix(payload, got[0].Body) || len(got[0].Body) == 0 {
				t.Errorf("first request: %d bytes not a prefix of the payload", len(got[0].Body))
			}
			for _, r := range got[1:] {
				if !bytes.Equal(r.Body, payload) {
					t.Errorf("re-sent body: %d bytes, want the %d original bytes", len(r.Body), len(payload))
				}
			}
		})
	}
}

func TestRedirectThen503NeverSendsAnEmptyBody(t *testing.T) {
	for _, code := range []int{307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			s := retrytest.NewServer(t, retrytest.Status(code, "Location", "/next"),
				retrytest.Status(503), retrytest.Status(200))
			p, _ := fakePolicy(retry.Policy{})
			client := &http.Client{Transport: retry.NewTransport(newBase(t), p)}
			payload := []byte(`{"prompt":"hello"}`)
			req := mustRequest(t, "POST", s.URL, payload)
			req.Header.Set("Idempotency-Key", "k1")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := s.Received()
			if resp.StatusCode != 200 || len(got) != 3 {
				t.Fatalf("status %d after %d requests, want 200 after 3", resp.StatusCode, len(got))
			}
			for i, r := range got {
				if !bytes.Equal(r.Body, payload) || r.Header.Get("Idempotency-Key") != "k1" {
					t.Errorf("request %d to %s: body %q, key %q; want %q, k1", i+1, r.Path, r.Body,
						r.Header.Get("Idempotency-Key"), payload)
				}
			}
		})
	}
}

// When a server resets the connection while a request body is being sent,
// net/http may report the write as "use of closed network connection"
// (its read side closed the connection first) rather than ECONNRESET.
func TestIsRetryableConnectionClosedDuringUpload(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "http://api.test", Err: &net.OpError{Op: "readfrom", Net: "tcp",
		Err: &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}}}
	if !retry.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = false, want true", err)
	}
}

func TestConcurrentCallersAgainstAnAlways500ServerCloseEveryBody(t *testing.T) {
	const callers, size = 50, 1 << 20
	s := retrytest.NewServer(t, retrytest.Step{Status: 500, BodySize: size})
	idle := retrytest.NewServer(t) // a connection the caller keeps idle meanwhile
	base := newBase(t)
	get := func(url string) int {
		resp, err := base.RoundTrip(mustRequest(t, "GET", url, nil))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	get(idle.URL)
	c := &counting{base: base}
	p := retry.Policy{MaxAttempts: 3, Sleep: func(context.Context, time.Duration) error { return nil }}
	rt := retry.NewTransport(c, p)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			resp, err := rt.RoundTrip(mustRequest(t, "GET", s.URL, nil))
			if err != nil {
				t.Error(err)
				return
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 500 || n != size || err != nil {
				t.Errorf("got %d with %d bytes, %v; want 500 with %d", resp.StatusCode, n, err, size)
			}
		})
	}
	wg.Wait()
	if c.calls.Load() != 3*callers || c.opened.Load() != c.closed.Load() {
		t.Errorf("%d calls, %d bodies opened, %d closed; want %d calls, all closed",
			c.calls.Load(), c.opened.Load(), c.closed.Load(), 3*callers)
	}
	if max := int64(callers * size); c.read.Load() > max+2*callers*64<<10 {
		t.Errorf("read %d bytes, want the callers' %d and at most 64 KiB per discarded body", c.read.Load(), max)
	}
	get(idle.URL)
	if idle.Conns() != 1 {
		t.Errorf("the idle connection was closed: %d connections to the other server, want 1", idle.Conns())
	}
	conns := s.Conns()
	s.Script(retrytest.Status(200))
	for range 20 {
		get(s.URL)
	}
	if s.Conns() != conns {
		t.Errorf("after the storm, 20 requests opened %d new connections; want the idle pool reused", s.Conns()-conns)
	}
	if conns > int(c.calls.Load()) {
		t.Errorf("%d connections for %d attempts", conns, c.calls.Load())
	}
	t.Logf("%d callers: %d connections for %d attempts", callers, conns, c.calls.Load())
}

func TestAlreadyCancelledContextMakesNoAttempt(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, ctx := range []context.Context{canceled, expired} {
		t.Run(ctx.Err().Error(), func(t *testing.T) {
			calls := 0
			_, err := retry.Do(ctx, retry.Policy{}, func(context.Context) (int, error) { calls++; return 0, nil })
			if calls != 0 || !errors.Is(err, ctx.Err()) {
				t.Errorf("Do: %d calls, %v; want none, an error that is %v", calls, err, ctx.Err())
			}
			s := retrytest.NewServer(t)
			c := &counting{base: newBase(t)}
			body := &closeCounter{Reader: bytes.NewReader([]byte("secret-body"))}
			req, _ := http.NewRequestWithContext(ctx, "POST", s.URL, body)
			resp, err := retry.NewTransport(c, retry.Policy{}).RoundTrip(req)
			if resp != nil || !errors.Is(err, ctx.Err()) || c.calls.Load() != 0 || s.Requests() != 0 {
				t.Errorf("RoundTrip: %v, %v after %d calls, %d requests; want nil, %v, none",
					resp, err, c.calls.Load(), s.Requests(), ctx.Err())
			}
			if body.closed.Load() != 1 {
				t.Errorf("request body closed %d times, want once", body.closed.Load())
			}
		})
	}
}

// closeCounter is a request body that counts its closes.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// lockedBuffer is a log destination safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// brokenBase breaks the RoundTripper contract: a response and an error.
type brokenBase struct{ status int }

func (b brokenBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: b.status, Body: io.NopCloser(bytes.NewReader([]byte("x"))),
		Header: http.Header{}, Request: req}, errors.New("broken base")
}

// Not parallel: it captures the standard logger, where net/http's Client
// reports a RoundTripper that returned a response and an error.
func TestNetHTTPNeverLogsAResponseAndAnError(t *testing.T) {
	var buf lockedBuffer
	prev := log.Writer()
	log.SetOutput(&buf)
	defer log.SetOutput(prev)
	steps := map[string]retrytest.Step{
		"reset":              {Reset: true},
		"reset mid-body":     {Status: 503, ResetAfter: 10},
		"stalled 503":        {Status: 503, Body: "x", Stall: true},
		"hang":               {Hang: true},
		"huge Retry-After":   retrytest.Status(503, "Retry-After", "123456789012345678901234567890"),
		"close":              {Status: 502, Close: true},
		"dribbled huge 503":  {Status: 503, BodySize: 1 << 30, Dribble: time.Millisecond},
		"x-should-retry 500": retrytest.Status(500, "X-Should-Retry", "true"),
	}
	p, _ := fakePolicy(retry.Policy{MaxAttempts: 2, AttemptTimeout: 50 * time.Millisecond})
	for name, st := range steps {
		s := retrytest.NewServer(t, st)
		client := &http.Client{Transport: retry.NewTransport(newBase(t), p)}
		for _, method := range []string{"GET", "POST"} {
			resp, err := client.Do(mustRequest(t, method, s.URL, []byte("secret-body")))
			if err == nil {
				resp.Body.Close()
			}
			if resp != nil && err != nil {
				t.Errorf("%s %s: a response and an error", name, method)
			}
		}
	}
	for _, status := range []int{200, 503} {
		client := &http.Client{Transport: retry.NewTransport(brokenBase{status}, p)}
		resp, err := client.Get("http://api.test/")
		if err == nil {
			resp.Body.Close()
			t.Errorf("broken base %d: no error", status)
		}
	}
	if strings.Contains(buf.String(), "RoundTripper returned a response & error") {
		t.Errorf("net/http logged:\n%s", buf.String())
	}
}
