package retry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry/retrytest"
)

func TestTransportRewindsBodiesThroughGetBody(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Status(503), retrytest.Status(503), retrytest.Step{Body: "ok"})
	// net/http may itself rewind a spent body through GetBody, so the
	// base records which body each attempt was given.
	base := newBase(t)
	var sent []io.ReadCloser
	p, _ := fakeTime(Policy{})
	tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		sent = append(sent, req.Body)
		return base.RoundTrip(req)
	}), p)
	payload := `{"model":"m","input":"hello"}`
	req := newRequest(t, "POST", srv.URL, nil)
	req.Header.Set("Idempotency-Key", "k1")
	src := &bodySource{data: payload}
	src.attach(req, true)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	wantUnread(t, resp, "ok")
	var bodies []string
	for _, r := range srv.Received() {
		bodies = append(bodies, string(r.Body))
	}
	if diff := cmp.Diff([]string{payload, payload, payload}, bodies); diff != "" {
		t.Errorf("bodies received (-want +got):\n%s", diff)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	// The first attempt sends req.Body, each later one a body of its own.
	if len(sent) != 3 || len(src.bodies) != 3 || sent[0] != req.Body ||
		sent[1] != src.bodies[1] || sent[2] != src.bodies[2] {
		t.Errorf("attempts sent bodies %v; want req.Body, then one fresh from GetBody each, %v", sent, src.bodies)
	}
}

func TestTransportSendsOnceWithoutGetBody(t *testing.T) {
	tests := []struct {
		name     string
		step     retrytest.Step
		wantCode int // 0: an error
	}{
		{name: "retryable status", step: retrytest.Step{Status: 503, Body: "busy"}, wantCode: 503},
		{name: "reset", step: retrytest.Step{Reset: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.step, retrytest.Step{Body: "ok"})
			// Counted at the base: an attempt with a spent body might not
			// reach the server.
			cb := &countingBase{base: newBase(t)}
			p, _ := fakeTime(Policy{})
			c := &http.Client{Transport: NewTransport(cb, p)}
			req := newRequest(t, "PUT", srv.URL, nil)
			req.Body = io.NopCloser(strings.NewReader("payload"))
			req.ContentLength = int64(len("payload"))
			req.Header.Set("Idempotency-Key", "k1")
			resp, err := c.Do(req)
			if tt.wantCode == 0 {
				if err == nil {
					resp.Body.Close()
					t.Errorf("got status %d, want an error", resp.StatusCode)
				}
			} else if err != nil || resp.StatusCode != tt.wantCode {
				t.Fatalf("got %v, want status %d", err, tt.wantCode)
			} else {
				wantUnread(t, resp, "busy")
			}
			if n := cb.attempts.Load(); n != 1 {
				t.Errorf("made %d attempts, want 1", n)
			}
		})
	}
}

// requestView is what a caller can see of its request, for checking that
// RoundTrip left it alone.
type requestView struct {
	Method        string
	URL           string
	URLPtr        *url.URL
	Header        http.Header
	Body          io.ReadCloser
	GetBody       uintptr
	ContentLength int64
	Ctx           context.Context
}

func viewRequest(req *http.Request) requestView {
	return requestView{
		Method: req.Method, URL: req.URL.String(), URLPtr: req.URL,
		Header: req.Header.Clone(), Body: req.Body,
		GetBody:       reflect.ValueOf(req.GetBody).Pointer(),
		ContentLength: req.ContentLength, Ctx: req.Context(),
	}
}

func TestTransportDoesNotModifyRequest(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Status(503), retrytest.Step{Body: "ok"})
	p, _ := fakeTime(Policy{})
	tr := NewTransport(newBase(t), p)
	req := newRequest(t, "POST", srv.URL+"/v1/chat?x=1", strings.NewReader("payload"))
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Authorization", "Bearer secret")
	before := viewRequest(req)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	wantUnread(t, resp, "ok")
	same := cmp.Options{ // by identity
		cmp.Comparer(func(a, b context.Context) bool { return a == b }),
		cmp.Comparer(func(a, b io.ReadCloser) bool { return a == b }),
		cmp.Comparer(func(a, b *url.URL) bool { return a == b }),
	}
	if diff := cmp.Diff(before, viewRequest(req), same); diff != "" {
		t.Errorf("request after RoundTrip (-before +after):\n%s", diff)
	}
	if n := srv.Requests(); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
	}
}

func TestTransportClosesRequestBodyOnEveryPath(t *testing.T) {
	tests := []struct {
		name      string
		steps     []retrytest.Step
		policy    Policy
		noRewind  bool // a body without GetBody
		cancelled bool // the caller's context is done before the call
	}{
		{name: "success", steps: []retrytest.Step{{Body: "ok"}}},
		{name: "retried, then success", steps: []retrytest.Step{{Status: 503}, {Body: "ok"}}},
		{name: "status not retried", steps: []retrytest.Step{{Status: 404}}},
		{name: "gave up on a status", steps: []retrytest.Step{{Status: 503}}, policy: Policy{MaxAttempts: 2}},
		{name: "gave up on an error", steps: []retrytest.Step{{Reset: true}}, policy: Policy{MaxAttempts: 2}},
		{name: "deadline before a retry", steps: []retrytest.Step{retrytest.Status(503, "Retry-After", "3600")}},
		{name: "sent once without GetBody", steps: []retrytest.Step{{Status: 503}}, noRewind: true},
		{name: "invalid policy", policy: Policy{MaxAttempts: -1}},
		{name: "context already cancelled", cancelled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.steps...)
			c, _ := newClient(t, tt.policy)
			ctx, cancel := context.WithCancel(t.Context())
			if tt.cancelled {
				cancel()
			}
			defer cancel()
			req := newRequest(t, "PUT", srv.URL, nil).WithContext(ctx)
			src := &bodySource{data: "payload"}
			src.attach(req, !tt.noRewind)
			if resp, err := c.Do(req); err == nil {
				readAll(t, resp)
			}
			if made, open := src.open(); open != 0 {
				t.Errorf("%d of %d request bodies left open", open, made)
			}
		})
	}
}

func TestTransportDrainsAndClosesDiscardedResponses(t *testing.T) {
	tests := []struct {
		name      string
		size      int64
		wantConns int
	}{
		{name: "small bodies reuse the connection", size: 100, wantConns: 1},
		// A body too long to drain costs its connection.
		{name: "1 MiB bodies are cut short", size: 1 << 20, wantConns: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t,
				retrytest.Step{Status: 503, BodySize: tt.size},
				retrytest.Step{Status: 503, BodySize: tt.size},
				retrytest.Step{Body: "ok"})
			cb := &countingBase{base: newBase(t)}
			p, _ := fakeTime(Policy{})
			resp, err := NewTransport(cb, p).RoundTrip(newRequest(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			discarded := cb.closed()
			if len(discarded) != 2 {
				t.Errorf("%d responses closed before the last returned, want 2", len(discarded))
			}
			for i, b := range discarded {
				// A short body is read to its end, so its connection can
				// serve the next attempt; a long one at most 64 KiB.
				if n := b.read.Load(); n > 64<<10 || (tt.size <= 64<<10 && n != tt.size) {
					t.Errorf("discarded response %d: read %d of %d bytes", i, n, tt.size)
				}
			}
			wantUnread(t, resp, "ok")
			if n := srv.Conns(); n != tt.wantConns {
				t.Errorf("server saw %d connections, want %d", n, tt.wantConns)
			}
		})
	}
}

// TestTransportDrainStopsAtAttemptTimeout: draining a body that never ends
// must not hold the retry up past the attempt's timeout.
type upgradeConn struct {
	io.Reader
	written bytes.Buffer
}

func (c *upgradeConn) Write(p []byte) (int, error) { return c.written.Write(p) }
func (c *upgradeConn) Close() error                { return nil }

func TestTransportKeepsWriterOnBody(t *testing.T) {
	tests := []struct {
		name       string
		body       io.ReadCloser
		wantWriter bool
	}{
		{name: "101 Switching Protocols", body: &upgradeConn{Reader: strings.NewReader("pong")}, wantWriter: true},
		{name: "plain body", body: io.NopCloser(strings.NewReader("pong"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				code := http.StatusOK
				if tt.wantWriter {
					code = http.StatusSwitchingProtocols
				}
				return &http.Response{StatusCode: code, Header: http.Header{}, Body: tt.body, Request: req}, nil
			}), Policy{})
			resp, err := tr.RoundTrip(newRequest(t, "GET", "http://example.test/ws", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			w, ok := resp.Body.(io.Writer)
			if ok != tt.wantWriter {
				t.Fatalf("body is an io.Writer: %v, want %v", ok, tt.wantWriter)
			}
			if ok {
				if _, err := io.WriteString(w, "ping"); err != nil {
					t.Fatal(err)
				}
				if got := tt.body.(*upgradeConn).written.String(); got != "ping" {
					t.Errorf("the connection got %q, want %q", got, "ping")
				}
			}
			if got, _ := io.ReadAll(resp.Body); string(got) != "pong" {
				t.Errorf("read %q, want %q", got, "pong")
			}
		})
	}
}
