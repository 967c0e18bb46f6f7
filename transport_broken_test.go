package retry

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// rawServer is a TCP server on loopback that answers the n-th connection
// with replies[n] written raw (the last one repeats), then closes it. It
// counts the requests it read.
type rawServer struct {
	ln       net.Listener
	replies  []string
	requests atomic.Int32
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, replies ...string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, replies: replies}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) serve() {
	defer s.wg.Done()
	for n := 0; ; n++ {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(conn))
		if err == nil {
			_, _ = io.Copy(io.Discard, req.Body)
			s.requests.Add(1)
			_, _ = io.WriteString(conn, s.replies[min(n, len(s.replies)-1)])
		}
		_ = conn.Close()
	}
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() + "/v1/things" }

const rawOK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

// TestTransportRetriesResponseBrokenInItsHeaders: a connection that breaks
// inside the response's status line or headers is a broken connection:
// retried for a GET, never for a POST without a key, since the request was
// sent. net/http reports it as "transport connection broken: malformed
// ..." (an error of its own it does not export).
func TestTransportRetriesResponseBrokenInItsHeaders(t *testing.T) {
	t.Parallel()
	broken := map[string]string{
		"half a header line":   "HTTP/1.1 200 OK\r\nContent-Ty",
		"garbled status line":  "HTTP/1.1 2x0 OK\r\n\r\n",
		"a header without ':'": "HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\nok",
	}
	for name, reply := range broken {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				srv := newRawServer(t, reply, reply, rawOK)
				client := &http.Client{Transport: &Transport{
					Base:   newBase(t),
					Policy: Policy{Base: 1, Cap: 1},
				}}
				req, err := http.NewRequest(method, srv.url(), strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := client.Do(req)
				if method == http.MethodGet {
					if err != nil {
						t.Fatalf("GET: %v, want 200 after 3 requests", err)
					}
					if got := readAll(t, resp); got != "ok" || srv.requests.Load() != 3 {
						t.Errorf("GET: body %q after %d requests, want ok after 3", got, srv.requests.Load())
					}
					continue
				}
				if err == nil {
					_ = resp.Body.Close()
					t.Fatalf("POST: status %d, want the broken connection's error", resp.StatusCode)
				}
				if got := srv.requests.Load(); got != 1 {
					t.Errorf("POST without a key sent %d times, want 1: %v", got, err)
				}
				if !IsRetryable(err) {
					t.Errorf("IsRetryable(%v) = false, want true: a broken connection", err)
				}
			}
		})
	}
}

// TestTransportRetriesServerClosedIdle: a pooled connection that the server
// closed before the request was handed to it. net/http re-sends only
// idempotent requests itself; the error proves the request never reached
// the server, so the Transport sends any method again.
func TestTransportRetriesServerClosedIdle(t *testing.T) {
	t.Parallel()
	calls := 0
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			// net/http returns its sentinel undecorated (transport.go,
			// mapRoundTripError: "Don't decorate").
			return nil, errors.New("http: server closed idle connection")
		}
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
	})
	tr := &Transport{Base: base, Policy: Policy{Base: 1, Cap: 1}}
	req, err := http.NewRequest(http.MethodPost, "http://api.example/v1/things", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST after the server closed the idle connection: %v, want 200", err)
	}
	_ = resp.Body.Close()
	if calls != 2 {
		t.Errorf("%d attempts, want 2", calls)
	}
}

// TestIsRetryableNetHTTPErrors: the texts and shapes of net/http's
// unexported errors, as a base returns them.
func TestIsRetryableNetHTTPErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"server closed idle", errors.New("http: server closed idle connection"), true},
		{"GOAWAY above the stream", errors.New("http2: Transport received Server's graceful shutdown GOAWAY"), true},
		{"GOAWAY on the first stream", errors.New("http2: Transport received GOAWAY from server ErrCode:ENHANCE_YOUR_CALM"), true},
		{"GOAWAY then close", http2GoAwayError{LastStreamID: 3}, true},
		{"malformed header", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w",
			textproto.ProtocolError("malformed MIME header line: Content-Length 2")), true},
		{"malformed status", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w",
			errors.New(`malformed HTTP status code "2x0"`)), true},
		{"a message that only quotes one", errors.New("upstream said: http: server closed idle connection"), false},
		{"a struct named otherwise", struct{ error }{errors.New("x")}, false},
	}
	for _, tc := range tests {
		if got := IsRetryable(tc.err); got != tc.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// http2GoAwayError has the shape of net/http's error of the same name.
type http2GoAwayError struct {
	LastStreamID uint32
	ErrCode      uint32
	DebugData    string
}

func (e http2GoAwayError) Error() string {
	return "http2: server sent GOAWAY and closed the connection"
}

// TestTransportRetriesGoAwayThenClose: an HTTP/2 server that sends GOAWAY
// naming the request's stream, then closes the connection. net/http
// reports its own http2GoAwayError: the request may have been processed,
// so it is a dropped connection: retried for a GET (here a real HTTP/2
// exchange over TLS), not for a POST without a key.
func TestTransportRetriesGoAwayThenClose(t *testing.T) {
	t.Parallel()
	var goaways atomic.Int32
	good := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	good.EnableHTTP2 = true
	good.StartTLS()
	t.Cleanup(good.Close)
	// The first connection goes to a listener that speaks just enough
	// HTTP/2 to read the request's HEADERS, answer GOAWAY and hang up.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", good.TLS)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			goAwayAfterHeaders(conn, &goaways)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })

	for _, method := range []string{http.MethodGet, http.MethodPost} {
		base := good.Client().Transport.(*http.Transport).Clone()
		t.Cleanup(base.CloseIdleConnections)
		n := 0
		var mu sync.Mutex
		dialer := &tls.Dialer{Config: base.TLSClientConfig}
		base.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			n++
			first := n == 1
			mu.Unlock()
			if first {
				addr = ln.Addr().String()
			}
			return dialer.DialContext(ctx, network, addr)
		}
		base.ForceAttemptHTTP2 = true
		client := &http.Client{Transport: &Transport{Base: base, Policy: Policy{Base: 1, Cap: 1}}}
		req, err := http.NewRequest(method, good.URL, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		before := goaways.Load()
		resp, err := client.Do(req)
		if method == http.MethodGet {
			if err != nil {
				t.Fatalf("GET: %v, want 200 from the second connection", err)
			}
			if got := readAll(t, resp); got != "ok" || resp.ProtoMajor != 2 {
				t.Errorf("GET: %q over HTTP/%d, want ok over HTTP/2", got, resp.ProtoMajor)
			}
			continue
		}
		if err == nil {
			_ = resp.Body.Close()
			t.Fatal("POST without a key: 200, want the GOAWAY error: it may have been processed")
		}
		if !strings.Contains(err.Error(), "GOAWAY") || goaways.Load() != before+1 {
			t.Errorf("POST: %v after %d GOAWAYs, want one GOAWAY error", err, goaways.Load()-before)
		}
	}
}

// goAwayAfterHeaders speaks HTTP/2 on conn until the client's first HEADERS
// frame, then counts a GOAWAY in sent, sends it naming that stream as the
// last, and closes.
func goAwayAfterHeaders(conn net.Conn, sent *atomic.Int32) {
	defer conn.Close()
	if err := conn.(*tls.Conn).Handshake(); err != nil {
		return
	}
	preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	if _, err := io.ReadFull(conn, preface); err != nil {
		return
	}
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		h := make([]byte, 9, 9+len(payload))
		h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		h[3], h[4] = typ, flags
		binary.BigEndian.PutUint32(h[5:], stream)
		return append(h, payload...)
	}
	if _, err := conn.Write(frame(0x4, 0, 0, nil)); err != nil { // SETTINGS
		return
	}
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(conn, hdr); err != nil {
			return
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, stream := hdr[3], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
		if _, err := io.CopyN(io.Discard, conn, int64(length)); err != nil {
			return
		}
		switch typ {
		case 0x4: // SETTINGS: acknowledge it, unless it is an ack
			if hdr[4]&0x1 == 0 {
				_, _ = conn.Write(frame(0x4, 0x1, 0, nil))
			}
		case 0x1: // HEADERS: the request
			payload := make([]byte, 8)
			binary.BigEndian.PutUint32(payload, stream) // last stream: this one
			sent.Add(1)
			_, _ = conn.Write(frame(0x7, 0, 0, payload)) // GOAWAY, NO_ERROR
			return
		}
	}
}

// TestTransportAttemptGetBody: an attempt of a request that must not run
// twice carries no GetBody, so that net/http cannot send it again by
// itself on the server's word (a REFUSED_STREAM that a proxy gives for a
// stream it had forwarded); one that may run twice keeps it, and net/http
// re-sends it where the protocol says it may.
func TestTransportAttemptGetBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		key        bool
		replayable bool
		want       bool
	}{
		{name: "keyless POST", want: false},
		{name: "keyed POST", key: true, want: true},
		{name: "POST that Replayable allows", replayable: true, want: true},
	}
	for _, tc := range tests {
		var got bool
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			got = req.GetBody != nil
			_ = req.Body.Close()
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
		})
		tr := &Transport{Base: base}
		if tc.replayable {
			tr.Replayable = func(*http.Request) bool { return true }
		}
		req, err := http.NewRequest(http.MethodPost, "http://api.example/v1/things", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if tc.key {
			req.Header.Set("Idempotency-Key", "k")
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got != tc.want {
			t.Errorf("%s: the attempt has GetBody: %v, want %v", tc.name, got, tc.want)
		}
	}
}
