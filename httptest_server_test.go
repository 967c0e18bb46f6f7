package retry

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/retrytest"
)

// Shared helpers for the Transport's tests. The scripted server itself is
// retrytest.Server; these only wire it to a Transport and observe what
// passes through.

// fakeTime returns p with its Clock, Sleep and Rand taken from a new
// FakeTime, so that backoff never waits.
func fakeTime(p Policy) (Policy, *retrytest.FakeTime) {
	ft := retrytest.NewFakeTime()
	p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
	return p, ft
}

// newBase returns an http.Transport of the test's own, so that counts of
// connections do not depend on other tests; its idle connections are
// closed when the test ends.
func newBase(t testing.TB) *http.Transport {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// newClient returns a client over a Transport with p on fake time, sending
// through a base of the test's own. Its 10s timeout turns a Transport that
// would hang into a failed test.
func newClient(t testing.TB, p Policy) (*http.Client, *retrytest.FakeTime) {
	p, ft := fakeTime(p)
	return &http.Client{Transport: NewTransport(newBase(t), p), Timeout: 10 * time.Second}, ft
}

// readAll reads resp's body to its end and closes it.
func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return string(b)
}

// wantUnread checks that resp's body still holds all of want: a body that
// was partly read would come back short.
func wantUnread(t testing.TB, resp *http.Response, want string) {
	t.Helper()
	if got := readAll(t, resp); got != want {
		t.Errorf("response body = %q, want %q, unread", got, want)
	}
}

// countingBase is a base RoundTripper that counts attempts and wraps every
// response body to count its Close calls and the bytes read from it.
type countingBase struct {
	base     http.RoundTripper
	attempts atomic.Int32

	mu     sync.Mutex // protects bodies
	bodies []*countedBody
}

func (c *countingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	c.attempts.Add(1)
	resp, err := c.base.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		b := &countedBody{rc: resp.Body}
		resp.Body = b
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
	}
	return resp, err
}

// closed returns the bodies closed so far, in the order they were received.
func (c *countingBase) closed() []*countedBody {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*countedBody
	for _, b := range c.bodies {
		if b.closes.Load() > 0 {
			out = append(out, b)
		}
	}
	return out
}

type countedBody struct {
	rc     io.ReadCloser
	read   atomic.Int64
	closes atomic.Int32
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countedBody) Close() error {
	b.closes.Add(1)
	return b.rc.Close()
}

// bodySource makes request bodies that record whether they were closed,
// for the first attempt and for every GetBody.
type bodySource struct {
	data string

	mu     sync.Mutex // protects bodies
	bodies []*trackedBody
}

type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error {
	b.closed.Store(true)
	return nil
}

func (s *bodySource) next() io.ReadCloser {
	b := &trackedBody{Reader: strings.NewReader(s.data)}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	return b
}

// attach gives req a tracked body and, when rewind is set, a GetBody.
func (s *bodySource) attach(req *http.Request, rewind bool) {
	req.Body = s.next()
	req.ContentLength = int64(len(s.data))
	req.GetBody = nil
	if rewind {
		req.GetBody = func() (io.ReadCloser, error) { return s.next(), nil }
	}
}

// open returns how many bodies were made and how many of them are still
// open. A base http.Transport may close a body after RoundTrip returns, so
// open waits up to a second for the count to reach zero.
func (s *bodySource) open() (made, open int) {
	for end := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		made, open = len(s.bodies), 0
		for _, b := range s.bodies {
			if !b.closed.Load() {
				open++
			}
		}
		s.mu.Unlock()
		if open == 0 || time.Now().After(end) {
			return made, open
		}
	}
}

// roundTripFunc is a base RoundTripper made of a function, for bases that
// misbehave or answer without a server.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
