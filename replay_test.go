package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// trackedBody is a request body without GetBody that counts its Close
// calls and any Read after the first Close.
type trackedBody struct {
	r          io.Reader
	mu         sync.Mutex
	closes     int
	lateReads  int
	closedOnce chan struct{}
}

func newTrackedBody(r io.Reader) *trackedBody {
	return &trackedBody{r: r, closedOnce: make(chan struct{})}
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closes > 0 {
		b.lateReads++
	}
	b.mu.Unlock()
	return b.r.Read(p)
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes++
	if b.closes == 1 {
		close(b.closedOnce)
	}
	return nil
}

// counts returns the Close calls and the late reads so far.
func (b *trackedBody) counts() (closes, lateReads int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes, b.lateReads
}

// waitClosed waits, with a wide margin, for the first Close, which a base
// may make from another goroutine after RoundTrip returns.
func (b *trackedBody) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-b.closedOnce:
	case <-time.After(10 * time.Second):
		t.Fatal("the original body was never closed")
	}
}

// payload is n bytes that differ from one offset to the next.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// bodyRequest is a request to url whose body has no GetBody; known says
// whether its ContentLength is set.
func bodyRequest(t *testing.T, method, url string, body io.ReadCloser, size int, known bool) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	if known {
		req.ContentLength = int64(size)
	}
	if req.GetBody != nil {
		t.Fatal("the request has GetBody")
	}
	return req
}

// recordingServer answers the first request with first and the rest with
// 200, recording every request's ContentLength and body.
type recordingServer struct {
	*httptest.Server
	mu      sync.Mutex
	lengths []int64
	bodies  [][]byte
}

func newRecordingServer(t *testing.T, first func(w http.ResponseWriter, r *http.Request, body []byte)) *recordingServer {
	s := &recordingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.lengths = append(s.lengths, r.ContentLength)
		s.bodies = append(s.bodies, body)
		n := len(s.bodies)
		s.mu.Unlock()
		if n == 1 && first != nil {
			first(w, r, body)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *recordingServer) received() ([]int64, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.lengths...), append([][]byte(nil), s.bodies...)
}

func fail503(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.WriteHeader(http.StatusServiceUnavailable)
}

func fail429(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.WriteHeader(http.StatusTooManyRequests)
}

func replayPolicy() retry.Policy {
	ft := retrytest.NewFakeTime()
	return retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
}

func TestReplayBufferResendsBodyWithoutGetBody(t *testing.T) {
	t.Parallel()
	const size = 200 << 10
	tests := []struct {
		name       string
		method     string
		buffer     int64
		known      bool
		first      func(w http.ResponseWriter, r *http.Request, body []byte) // nil: 503
		wantStatus int
		wantSends  int
	}{
		{name: "known length", method: http.MethodPut, buffer: 1 << 20, known: true, wantStatus: 200, wantSends: 2},
		{name: "unknown length", method: http.MethodPut, buffer: 1 << 20, wantStatus: 200, wantSends: 2},
		{name: "exactly the limit", method: http.MethodPut, buffer: size, known: true, wantStatus: 200, wantSends: 2},
		{name: "zero keeps sending once", method: http.MethodPut, buffer: 0, known: true, wantStatus: 503, wantSends: 1},
		{name: "past the limit is sent once", method: http.MethodPut, buffer: size - 1, wantStatus: 503, wantSends: 1},
		{name: "a bare POST after a 503 is not re-sent", method: http.MethodPost, buffer: 1 << 20, known: true,
			wantStatus: 503, wantSends: 1},
		{name: "a bare POST after a 429 is re-sent", method: http.MethodPost, buffer: 1 << 20, known: true,
			first: fail429, wantStatus: 200, wantSends: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			first := tt.first
			if first == nil {
				first = fail503
			}
			srv := newRecordingServer(t, first)
			want := payload(size)
			body := newTrackedBody(bytes.NewReader(want))
			tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: tt.buffer}
			resp, err := tr.RoundTrip(bodyRequest(t, tt.method, srv.URL, body, size, tt.known))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			body.waitClosed(t)
			lengths, bodies := srv.received()
			if len(bodies) != tt.wantSends {
				t.Fatalf("sends = %d, want %d", len(bodies), tt.wantSends)
			}
			wantLength := int64(-1)
			if tt.known {
				wantLength = size
			}
			for i := range bodies {
				if !bytes.Equal(bodies[i], want) {
					t.Errorf("send %d: body of %d bytes differs from the %d sent", i+1, len(bodies[i]), size)
				}
				if lengths[i] != wantLength {
					t.Errorf("send %d: ContentLength = %d, want %d", i+1, lengths[i], wantLength)
				}
			}
			if closes, late := body.counts(); closes != 1 || late != 0 {
				t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
			}
		})
	}
}

func TestReplayBufferAfterUploadReset(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	srv := retrytest.NewServer(t, retrytest.Step{ResetRequestAfter: size / 3}, retrytest.Status(200))
	want := payload(size)
	body := newTrackedBody(bytes.NewReader(want))
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 2 << 20}
	resp, err := tr.RoundTrip(bodyRequest(t, http.MethodPut, srv.URL, body, size, true))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
	got := srv.Received()
	if len(got) != 2 {
		t.Fatalf("sends = %d, want 2", len(got))
	}
	if !bytes.Equal(got[1].Body, want) {
		t.Errorf("the second send carried %d bytes that differ from the %d of the body", len(got[1].Body), size)
	}
	if !bytes.Equal(got[0].Body, want[:len(got[0].Body)]) {
		t.Error("the first send's bytes are not the body's start")
	}
	body.waitClosed(t)
	if closes, late := body.counts(); closes != 1 || late != 0 {
		t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
	}
}

func TestReplayBufferNegativeIsInvalid(t *testing.T) {
	t.Parallel()
	var sends atomic.Int32
	body := newTrackedBody(strings.NewReader("x"))
	tr := &retry.Transport{ReplayBuffer: -1, Base: baseFunc(func(*http.Request) (*http.Response, error) {
		sends.Add(1)
		return nil, errors.New("unreachable")
	})}
	_, err := tr.RoundTrip(bodyRequest(t, http.MethodPut, "http://example.test/", body, 1, true))
	if !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("err = %v, want ErrInvalidPolicy", err)
	}
	if sends.Load() != 0 {
		t.Errorf("%d sends, want none", sends.Load())
	}
	if closes, _ := body.counts(); closes != 1 {
		t.Errorf("body closed %d times, want 1", closes)
	}
}

func TestReplayBufferNeverCopiesABodyWithGetBody(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest(http.MethodPut, "http://example.test/", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	orig := req.Body
	var bodies []io.ReadCloser
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
		Base: baseFunc(func(r *http.Request) (*http.Response, error) {
			bodies = append(bodies, r.Body)
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
		})}
	tr.Policy.MaxAttempts = 2
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 || bodies[0] != orig {
		t.Errorf("the first attempt sent %T, not the request's own body", bodies[0])
	}
}

func TestReplayBufferConcurrentCalls(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		id := r.Header.Get("X-Id")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		switch {
		case err != nil:
			w.WriteHeader(http.StatusBadRequest)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case !bytes.Equal(b, payload(len(b))) || len(b) != 50<<10:
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			body := newTrackedBody(bytes.NewReader(payload(50 << 10)))
			req := bodyRequest(t, http.MethodPut, srv.URL, body, 50<<10, i%2 == 0)
			req = req.WithContext(context.Background())
			req.Header.Set("X-Id", fmt.Sprint(i))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				errs <- fmt.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReplayBufferEarlyAnswer: the server answers 503 before reading the
// upload, so net/http may still be sending the first attempt's body while
// the second begins, over HTTP/1.1 and HTTP/2.
func TestReplayBufferEarlyAnswer(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			t.Parallel()
			var sends atomic.Int32
			var mu sync.Mutex
			var last []byte
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if sends.Add(1) == 1 {
					w.WriteHeader(http.StatusServiceUnavailable) // the body unread
					return
				}
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				last = b
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
			srv.EnableHTTP2 = h2
			if h2 {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			want := payload(size)
			body := newTrackedBody(bytes.NewReader(want))
			tr := &retry.Transport{Base: srv.Client().Transport, Policy: replayPolicy(), ReplayBuffer: 2 << 20}
			resp, err := tr.RoundTrip(bodyRequest(t, http.MethodPut, srv.URL, body, size, true))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != 200 || sends.Load() != 2 || !bytes.Equal(last, want) {
				t.Errorf("status %d after %d sends, last body %d bytes; want 200 after 2 with the %d of the body",
					resp.StatusCode, sends.Load(), len(last), size)
			}
			body.waitClosed(t)
			if closes, late := body.counts(); closes != 1 || late != 0 {
				t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
			}
		})
	}
}
