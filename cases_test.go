package retry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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
