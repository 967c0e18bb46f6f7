package retry_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// gatedBody is a request body without GetBody that serves its first open
// bytes at once and the rest only after release, as an upload from a slow
// producer does. The Transport never reads it from two goroutines at once.
type gatedBody struct {
	data []byte
	open int
	pos  int

	gate      chan struct{} // closed by release
	releaseMu sync.Once
	waiting   chan struct{} // closed when a Read first waits for release
	waitMu    sync.Once
	closed    chan struct{} // closed by Close
	closeMu   sync.Once
}

func newGatedBody(data []byte, open int) *gatedBody {
	return &gatedBody{data: data, open: open, gate: make(chan struct{}), waiting: make(chan struct{}),
		closed: make(chan struct{})}
}

func (b *gatedBody) release() { b.releaseMu.Do(func() { close(b.gate) }) }

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.pos >= b.open {
		b.waitMu.Do(func() { close(b.waiting) })
		select {
		case <-b.gate:
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
	}
	end := len(b.data)
	if b.pos < b.open {
		end = b.open
	}
	if b.pos == end {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.pos:end])
	b.pos += n
	return n, nil
}

func (b *gatedBody) Close() error {
	b.closeMu.Do(func() { close(b.closed) })
	return nil
}

// lateUploadServer answers the first request with a 503 after reading
// first bytes of it and the next ones with 200 when they carry the whole
// upload, byte for byte; a 400 says what came instead. With hangUp, the
// 503 says Connection: close and the server closes the connection once
// the client is done sending; without, it reads the rest of the upload
// after its answer and keeps the connection. A non-nil ready holds the 503
// until it is closed.
func lateUploadServer(t *testing.T, want []byte, first int, hangUp bool, ready <-chan struct{}) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256(want)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			got, err := io.ReadAll(r.Body)
			if err != nil || sha256.Sum256(got) != sum {
				http.Error(w, fmt.Sprintf("received %d bytes (%v), not the %d of the upload", len(got), err, len(want)),
					http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if _, err := io.ReadFull(r.Body, make([]byte, first)); err != nil {
			t.Errorf("reading the first %d bytes of the upload: %v", first, err)
			return
		}
		if ready != nil {
			select {
			case <-ready:
			case <-time.After(10 * time.Second):
				t.Error("the upload never waited on its producer")
			}
		}
		if hangUp {
			hangUpWith503(t, w)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil { // answer before the upload ends
			t.Error(err)
		}
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "busy\n")
		_ = rc.Flush()
		_, _ = io.Copy(io.Discard, r.Body) // until the client stops sending
	}))
	t.Cleanup(srv.Close)
	return srv
}

// hangUpWith503 answers on the bare connection and closes it once the
// client has stopped sending, so that no reset cuts the answer.
func hangUpWith503(t *testing.T, w http.ResponseWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 5\r\n\r\nbusy\n")
	_ = rw.Flush()
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.Copy(io.Discard, bufio.NewReader(rw))
}

// lateUploadRequest is a PUT of body to url whose first write, the first
// attempt's, closes wrote when it ends.
func lateUploadRequest(t *testing.T, url string, body io.ReadCloser, size int, wrote chan struct{}) *http.Request {
	t.Helper()
	var once sync.Once
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) },
	})
	req := bodyRequest(t, http.MethodPut, url, body, size, true)
	return req.WithContext(ctx)
}

// lateUploadPolicy is a Policy whose one sleep returns once the first
// attempt's upload has ended, however it ends: every byte the first
// attempt reads, it has read before the second begins.
func lateUploadPolicy(t *testing.T, wrote <-chan struct{}) retry.Policy {
	return retry.Policy{MaxAttempts: 2, Rand: func() float64 { return 0 },
		Sleep: func(ctx context.Context, _ time.Duration) error {
			select {
			case <-wrote:
			case <-time.After(10 * time.Second):
				t.Error("the first attempt's upload never ended")
			}
			return ctx.Err()
		}}
}

// releasingBase sends through a base of the test's own and lets body's
// producer go on when the first response's body is first read: once the
// Transport has judged that response, while net/http still waits for the
// upload to end before it reuses the connection.
func releasingBase(t *testing.T, body *gatedBody) http.RoundTripper {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return baseFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body = &releasingBody{ReadCloser: resp.Body, body: body}
		}
		return resp, err
	})
}

type releasingBody struct {
	io.ReadCloser
	body *gatedBody
}

func (b *releasingBody) Read(p []byte) (int, error) {
	b.body.release()
	return b.ReadCloser.Read(p)
}

// TestReplayBufferLateUpload: a server answers 503 after reading 1 KiB of
// a 1 MiB upload while net/http goes on sending it during the backoff.
// Those late reads must not pass ReplayBuffer: the second attempt sends
// the whole body again.
func TestReplayBufferLateUpload(t *testing.T) {
	t.Parallel()
	const size, buffer = 1 << 20, 64 << 10
	for _, hangUp := range []bool{false, true} {
		t.Run(fmt.Sprintf("hangUp=%v", hangUp), func(t *testing.T) {
			t.Parallel()
			want := payload(size)
			srv := lateUploadServer(t, want, 1<<10, hangUp, nil)
			body := newGatedBody(want, 1<<10)
			t.Cleanup(body.release)
			wrote := make(chan struct{})
			tr := &retry.Transport{Base: releasingBase(t, body), ReplayBuffer: buffer,
				Policy: lateUploadPolicy(t, wrote)}
			resp, err := tr.RoundTrip(lateUploadRequest(t, srv.URL, body, size, wrote))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d (%s), want 200 with the whole upload sent again", resp.StatusCode, bytes.TrimSpace(got))
			}
		})
	}
}

// TestReplayBufferLateUploadPastTheBuffer: once the upload has passed
// ReplayBuffer, or a read that passes it is under way when the 503 comes,
// the body cannot be sent again, and the caller gets the 503 itself,
// whole, never an error.
func TestReplayBufferLateUploadPastTheBuffer(t *testing.T) {
	t.Parallel()
	const size, buffer = 1 << 20, 64 << 10
	tests := []struct {
		name    string
		first   int  // bytes the server reads before its answer
		open    int  // bytes the producer gives at once
		waiting bool // the server answers once a read waits on the producer
	}{
		{name: "past the buffer", first: 2 * buffer, open: size},
		{name: "reading past the buffer", first: buffer, open: buffer, waiting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := payload(size)
			body := newGatedBody(want, tt.open)
			var ready <-chan struct{}
			if tt.waiting {
				ready = body.waiting
			}
			srv := lateUploadServer(t, want, tt.first, false, ready)
			t.Cleanup(body.release)
			wrote := make(chan struct{})
			tr := &retry.Transport{Base: releasingBase(t, body), ReplayBuffer: buffer,
				Policy: lateUploadPolicy(t, wrote)}
			resp, err := tr.RoundTrip(lateUploadRequest(t, srv.URL, body, size, wrote))
			if err != nil {
				t.Fatalf("RoundTrip: %v; want the 503", err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || err != nil || string(got) != "busy\n" {
				t.Errorf("status %d, body %q (%v); want the 503 with its body, whole", resp.StatusCode, got, err)
			}
			body.release() // the upload goes on, and ends, after the call
			select {
			case <-body.closed:
			case <-time.After(10 * time.Second):
				t.Error("the original body was never closed")
			}
		})
	}
}
