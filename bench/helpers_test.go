package bench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	okPayload   = []byte(`{"id":"msg_01","type":"message","content":"ok"}`)
	busyPayload = []byte(`{"error":{"type":"overloaded_error"}}`)
	jsonType    = []string{"application/json"}
	sink        atomic.Int64
)

// response returns a fresh response, as a real transport would.
func response(req *http.Request, code int) *http.Response {
	p, status := okPayload, "200 OK"
	if code != http.StatusOK {
		p, status = busyPayload, "503 Service Unavailable"
	}
	return &http.Response{
		Status: status, StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": jsonType},
		Body:          io.NopCloser(bytes.NewReader(p)),
		ContentLength: int64(len(p)),
		Request:       req,
	}
}

// memRT answers in memory: 503 where its script (a cycle; true means 503)
// says so, else 200. It reads and closes any request body first. It is not
// safe for concurrent use.
type memRT struct {
	fail []bool
	n    int
}

func (m *memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		n, _ := io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
		sink.Add(n)
	}
	code := http.StatusOK
	if len(m.fail) > 0 {
		if m.fail[m.n%len(m.fail)] {
			code = http.StatusServiceUnavailable
		}
		m.n++
	}
	return response(req, code), nil
}

// bodyCounter wraps a base RoundTripper and counts the response bodies
// that a middleware dropped without closing. After each request, sweep
// closes the bodies still open (the caller has closed the one it got), so
// that a leaking middleware does not run the benchmark out of connections
// and file descriptors; in a real program they would stay open. RoundTrip is
// safe for concurrent use; sweep is not, with requests in flight.
type bodyCounter struct {
	base     http.RoundTripper
	mu       sync.Mutex // protects bodies
	bodies   []*countedBody
	unclosed atomic.Int64
}

func (c *bodyCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		cb := &countedBody{ReadCloser: resp.Body}
		resp.Body = cb
		c.mu.Lock()
		c.bodies = append(c.bodies, cb)
		c.mu.Unlock()
	}
	return resp, err
}

// sweep counts and closes the bodies left open.
func (c *bodyCounter) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.bodies {
		if !b.done.Load() {
			c.unclosed.Add(1)
			_ = b.Close()
		}
		c.bodies[i] = nil
	}
	c.bodies = c.bodies[:0]
}

type countedBody struct {
	io.ReadCloser
	done atomic.Bool
}

func (b *countedBody) Close() error {
	b.done.Store(true)
	return b.ReadCloser.Close()
}

// consume reads a response body to its end and closes it, as a caller does.
func consume(b *testing.B, resp *http.Response, err error) {
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d, want 200", resp.StatusCode)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	if err := resp.Body.Close(); err != nil {
		b.Fatal(err)
	}
	sink.Add(n)
}

// loopback is an HTTP/1.1 server on 127.0.0.1 that answers 503 where its
// script (a cycle, as memRT's) says so, else 200, and counts the
// connections it accepts.
type loopback struct {
	srv   *httptest.Server
	conns atomic.Int64
	n     atomic.Int64
}

func newLoopback(b *testing.B, fail []bool) *loopback {
	l := new(loopback)
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = jsonType
		if len(fail) > 0 && fail[(l.n.Add(1)-1)%int64(len(fail))] {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(busyPayload)
			return
		}
		_, _ = w.Write(okPayload)
	}))
	l.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			l.conns.Add(1)
		}
	}
	l.srv.Start()
	b.Cleanup(l.srv.Close)
	return l
}

// tunedTransport is a base transport as a service calling one API host
// would configure it.
func tunedTransport(b *testing.B) *http.Transport {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	b.Cleanup(tr.CloseIdleConnections)
	return tr
}

// schedCPU sums the CPU time, in nanoseconds, of the threads whose
// schedstat files match pattern (Linux only; ok is false elsewhere).
func schedCPU(pattern string) (ns int64, ok bool) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		return 0, false
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue // the thread exited
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		ns += n
	}
	return ns, true
}

// measureCPU counts the CPU time of the whole process until the returned
// function is called, which reports it as cpu-ns/op. The goroutine is not
// locked to its thread; see the library's bench_test.go.
func measureCPU(b *testing.B) (stop func()) {
	const pattern = "/proc/self/task/*/schedstat"
	start, ok := schedCPU(pattern)
	return func() {
		end, ok2 := schedCPU(pattern)
		if ok && ok2 && b.N > 0 && end >= start {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
