package retry

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry/retrytest"
)

// newRequest makes a request bound to the test's context, failing the test
// on error.
func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestTransportJudgesStatusesByPolicy(t *testing.T) {
	type seen struct {
		StatusCode  int
		RetryAfter  time.Duration
		HasResponse bool
	}
	tests := []struct {
		name       string
		steps      []retrytest.Step
		retry      func(code int) bool
		want       []seen
		wantStatus int
		wantBody   string
	}{
		{
			name:  "retryable status, then success",
			steps: []retrytest.Step{retrytest.Status(503, "Retry-After", "3"), {Body: "ok"}},
			retry: func(code int) bool { return code == 503 },
			want:  []seen{{StatusCode: 503, RetryAfter: 3 * time.Second, HasResponse: true}},
			// A status below 400 is not judged.
			wantStatus: 200, wantBody: "ok",
		},
		{
			name:       "status the policy rejects",
			steps:      []retrytest.Step{{Status: 503, Body: "busy"}},
			retry:      func(int) bool { return false },
			want:       []seen{{StatusCode: 503, HasResponse: true}},
			wantStatus: 503, wantBody: "busy",
		},
		{
			name:       "status the policy accepts although IsRetryable would not",
			steps:      []retrytest.Step{{Status: 400}, {Body: "ok"}},
			retry:      func(int) bool { return true },
			want:       []seen{{StatusCode: 400, HasResponse: true}},
			wantStatus: 200, wantBody: "ok",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.steps...)
			var mu sync.Mutex
			var got []seen
			c, _ := newClient(t, Policy{Retryable: func(err error) bool {
				se, ok := errors.AsType[*StatusError](err)
				if !ok {
					t.Errorf("Retryable got %T %v, want a *StatusError", err, err)
					return false
				}
				mu.Lock()
				got = append(got, seen{se.StatusCode, se.RetryAfter, se.Response != nil})
				mu.Unlock()
				return tt.retry(se.StatusCode)
			}})
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			wantUnread(t, resp, tt.wantBody)
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors judged by Retryable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransportReturnsResponseNotRetriedUnchanged(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{
		Status: 404, Header: http.Header{"X-Request-Id": {"r1"}}, Body: "no such model",
	})
	c, ft := newClient(t, Policy{})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
	if resp.StatusCode != 404 || resp.Header.Get("X-Request-Id") != "r1" {
		t.Errorf("got %d with X-Request-Id %q, want 404 with r1", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	wantUnread(t, resp, "no such model")
	if n := srv.Requests(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
	if s := ft.Sleeps(); len(s) != 0 {
		t.Errorf("slept %v, want no sleep", s)
	}
}

func TestTransportGivesUpOnStatusWithLastResponse(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t,
		retrytest.Step{Status: 503, Body: "first"},
		retrytest.Step{Status: 503, Body: "second"},
		retrytest.Step{Status: 503, Body: "third"},
	)
	c, ft := newClient(t, Policy{MaxAttempts: 3})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("err = %v, want nil", err)
	}
	if resp.StatusCode != 503 {
		t.Errorf("status = %d, want 503", resp.StatusCode)
	}
	wantUnread(t, resp, "third")
	if n := srv.Requests(); n != 3 {
		t.Errorf("server got %d requests, want 3", n)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second} // none after the last
	if diff := cmp.Diff(want, ft.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
}

func TestTransportGivesUpOnErrorWithError(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Reset: true})
	c, _ := newClient(t, Policy{MaxAttempts: 3})
	resp, err := c.Get(srv.URL)
	if resp != nil {
		resp.Body.Close()
		t.Errorf("got a response with the error %v", err)
	}
	if _, ok := errors.AsType[*url.Error](err); !ok {
		t.Errorf("err = %v, want a *url.Error from the client", err)
	}
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("err = %v, want a *Error inside", err)
	}
	if e.Attempts != 3 || e.Reason != ReasonMaxAttempts || e.Err == nil {
		t.Errorf("got Attempts %d, Reason %q, Err %v; want 3, %q and the last error",
			e.Attempts, e.Reason, e.Err, ReasonMaxAttempts)
	}
	if n := srv.Requests(); n != 3 {
		t.Errorf("server got %d requests, want 3", n)
	}
}

func TestTransportRetriesOnlyWhatMayRunTwice(t *testing.T) {
	fail500 := []retrytest.Step{{Status: 500}, {Body: "ok"}}
	reset := []retrytest.Step{{Reset: true}, {Body: "ok"}}
	hang := []retrytest.Step{{Hang: true}, {Body: "ok"}}
	key := func(k string) http.Header { return http.Header{k: {"k1"}} }
	tests := []struct {
		name      string
		method    string
		header    http.Header
		steps     []retrytest.Step
		wantTries int // requests the server receives
		wantCode  int // the status returned; 0: an error returned as it came
	}{
		{name: "GET on 500", method: "GET", steps: fail500, wantTries: 2, wantCode: 200},
		{name: "HEAD on 500", method: "HEAD", steps: fail500, wantTries: 2, wantCode: 200},
		{name: "OPTIONS on 500", method: "OPTIONS", steps: fail500, wantTries: 2, wantCode: 200},
		{name: "TRACE on 500", method: "TRACE", steps: fail500, wantTries: 2, wantCode: 200},
		{name: "PUT on 500", method: "PUT", steps: fail500, wantTries: 2, wantCode: 200},
		{name: "DELETE on 500", method: "DELETE", steps: fail500, wantTries: 2, wantCode: 200},
		{name: "GET on reset", method: "GET", steps: reset, wantTries: 2, wantCode: 200},
		{name: "POST on 500", method: "POST", steps: fail500, wantTries: 1, wantCode: 500},
		{name: "PATCH on 500", method: "PATCH", steps: fail500, wantTries: 1, wantCode: 500},
		{name: "POST on reset", method: "POST", steps: reset, wantTries: 1},
		{name: "PATCH on reset", method: "PATCH", steps: reset, wantTries: 1},
		{name: "POST on attempt timeout", method: "POST", steps: hang, wantTries: 1},
		{name: "PATCH on attempt timeout", method: "PATCH", steps: hang, wantTries: 1},
		{name: "POST with Idempotency-Key on 500", method: "POST", header: key("Idempotency-Key"),
			steps: fail500, wantTries: 2, wantCode: 200},
		{name: "POST with X-Idempotency-Key on 500", method: "POST", header: key("X-Idempotency-Key"),
			steps: fail500, wantTries: 2, wantCode: 200},
		{name: "POST with nil Idempotency-Key on 500", method: "POST", header: http.Header{"Idempotency-Key": nil},
			steps: fail500, wantTries: 2, wantCode: 200},
		{name: "PATCH with Idempotency-Key on reset", method: "PATCH", header: key("Idempotency-Key"),
			steps: reset, wantTries: 2, wantCode: 200},
		{name: "POST on 429", method: "POST", steps: []retrytest.Step{{Status: 429}, {Body: "ok"}},
			wantTries: 2, wantCode: 200},
		{name: "POST on 500 with x-should-retry: true", method: "POST",
			steps:     []retrytest.Step{retrytest.Status(500, "X-Should-Retry", "true"), {Body: "ok"}},
			wantTries: 2, wantCode: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.steps...)
			c, _ := newClient(t, Policy{AttemptTimeout: 100 * time.Millisecond})
			req := newRequest(t, tt.method, srv.URL, strings.NewReader(`{"n":1}`))
			maps.Copy(req.Header, tt.header)
			resp, err := c.Do(req)
			if n := srv.Requests(); n != tt.wantTries {
				t.Errorf("server got %d requests, want %d", n, tt.wantTries)
			}
			switch {
			case tt.wantCode == 0 && err == nil:
				resp.Body.Close()
				t.Errorf("got status %d, want the attempt's error", resp.StatusCode)
			case tt.wantCode == 0:
				if _, ok := errors.AsType[*Error](err); ok {
					t.Errorf("err = %v, want the attempt's error, not a *Error", err)
				}
			case err != nil:
				t.Errorf("err = %v, want status %d", err, tt.wantCode)
			default:
				resp.Body.Close()
				if resp.StatusCode != tt.wantCode {
					t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantCode)
				}
			}
		})
	}
}

// TestTransportRetriesPostWhenConnectionRefused: a refused connection
// proves the request never reached a server, so even a bare POST is sent
// again. No server sees the attempts; the base counts them.
func TestTransportRetriesPostWhenConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cb := &countingBase{base: newBase(t)}
	p, _ := fakeTime(Policy{MaxAttempts: 3})
	c := &http.Client{Transport: NewTransport(cb, p)}
	resp, err := c.Post("http://"+addr+"/v1/responses", "application/json", strings.NewReader("{}"))
	if resp != nil {
		resp.Body.Close()
	}
	if n := cb.attempts.Load(); n != 3 {
		t.Errorf("made %d attempts, want 3", n)
	}
	if e, ok := errors.AsType[*Error](err); !ok || e.Attempts != 3 || e.Reason != ReasonMaxAttempts {
		t.Errorf("err = %v, want a *Error after 3 attempts (%s)", err, ReasonMaxAttempts)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("err = %v, want ECONNREFUSED inside", err)
	}
}

// resetHandshakes accepts connections and resets each one as soon as the
// client's TLS handshake begins. It returns the listener's address.
func resetHandshakes(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 16)) // the start of the ClientHello
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestTransportRetriesPostWhenTLSHandshakeFails: a connection dropped
// during the TLS handshake, like a refused one, proves the request never
// reached a server; one dropped after the request arrived does not.
func TestTransportRetriesPostWhenTLSHandshakeFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		server    func(t *testing.T) (url string, base *http.Transport)
		wantTries int32
	}{
		{name: "reset during the handshake", wantTries: 3,
			server: func(t *testing.T) (string, *http.Transport) {
				base := newBase(t)
				base.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
				return "https://" + resetHandshakes(t), base
			}},
		{name: "reset after the request arrived", wantTries: 1,
			server: func(t *testing.T) (string, *http.Transport) {
				srv := retrytest.NewTLSServer(t, retrytest.Step{Reset: true})
				return srv.URL, srv.Client().Transport.(*http.Transport)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, base := tt.server(t)
			cb := &countingBase{base: base}
			p, _ := fakeTime(Policy{MaxAttempts: 3})
			resp, err := (&http.Client{Transport: NewTransport(cb, p)}).Post(url, "application/json", strings.NewReader("{}"))
			if resp != nil {
				resp.Body.Close()
				t.Errorf("got status %d, want an error", resp.StatusCode)
			}
			if n := cb.attempts.Load(); n != tt.wantTries {
				t.Errorf("made %d attempts, want %d (err %v)", n, tt.wantTries, err)
			}
		})
	}
}

func TestTransportRejectsInvalidPolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
	}{
		{name: "MaxAttempts", policy: Policy{MaxAttempts: -1}},
		{name: "AttemptTimeout", policy: Policy{AttemptTimeout: -time.Second}},
		{name: "Deadline", policy: Policy{Deadline: -time.Second}},
		{name: "Base", policy: Policy{Base: -time.Second}},
		{name: "Cap", policy: Policy{Cap: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t)
			resp, err := NewTransport(newBase(t), tt.policy).RoundTrip(newRequest(t, "GET", srv.URL, nil))
			if resp != nil {
				resp.Body.Close()
				t.Errorf("got status %d, want an error", resp.StatusCode)
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("err = %v, want ErrInvalidPolicy", err)
			}
			if n := srv.Requests(); n != 0 {
				t.Errorf("server got %d requests, want none", n)
			}
		})
	}
}

func TestTransportZeroValueWorks(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Body: "ok"})
	resp, err := (&http.Client{Transport: &Transport{}}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	wantUnread(t, resp, "ok")
}

func TestTransportSurvivesBrokenBase(t *testing.T) {
	t.Parallel()
	t.Run("nil response and nil error", func(t *testing.T) {
		t.Parallel()
		tr := NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }), Policy{})
		resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
		if resp != nil || !errors.Is(err, errNilResponse) {
			t.Errorf("got %v, %v; want no response and errNilResponse", resp, err)
		}
	})
	tests := []struct {
		name      string
		err       error
		wantTries int32
	}{
		{name: "response and an error not retried", err: errors.New("broken"), wantTries: 1},
		{name: "response and a retryable error", err: syscall.ECONNRESET, wantTries: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cb := &countingBase{base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				body := io.NopCloser(strings.NewReader("junk"))
				return &http.Response{StatusCode: 200, Body: body, Request: req}, tt.err
			})}
			p, _ := fakeTime(Policy{MaxAttempts: 2})
			resp, err := NewTransport(cb, p).RoundTrip(newRequest(t, "GET", "http://example.test/", nil))
			if resp != nil || !errors.Is(err, tt.err) {
				t.Errorf("got %v, %v; want no response and the base's error", resp, err)
			}
			if n := cb.attempts.Load(); n != tt.wantTries {
				t.Errorf("made %d attempts, want %d", n, tt.wantTries)
			}
			if n := len(cb.closed()); n != int(tt.wantTries) {
				t.Errorf("%d of %d responses closed", n, tt.wantTries)
			}
		})
	}
}

func TestTransportConcurrentUse(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{} // paths answered once already
	srv := retrytest.NewServer(t, retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		again := seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		if !again {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, r.URL.Path)
	}})
	var retries atomic.Int32
	p, _ := fakeTime(Policy{Base: time.Millisecond, OnRetry: func(Event) { retries.Add(1) }})
	c := &http.Client{Transport: NewTransport(newBase(t), p)}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			path := fmt.Sprintf("/%d", i)
			resp, err := c.Get(srv.URL + path)
			if err != nil {
				t.Error(err)
				return
			}
			if got := readAll(t, resp); resp.StatusCode != 200 || got != path {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, got, path)
			}
		})
	}
	wg.Wait()
	if got := srv.Requests(); got != 2*n {
		t.Errorf("server got %d requests, want %d", got, 2*n)
	}
	if got := retries.Load(); got != n {
		t.Errorf("%d retries, want %d", got, n)
	}
}
