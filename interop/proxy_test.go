package interop_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// fault is one scripted answer of a faultProxy. The zero fault forwards the
// request to the backend and relays its answer.
type fault struct {
	// Status, when set, answers with this status, Header and Body without
	// forwarding: the backend never sees the request.
	Status int
	Header http.Header
	Body   string

	// Early answers Status before reading any of the request body, as a
	// server that refuses an upload at its headers does. A client that
	// sent Expect: 100-continue then never sends the body.
	Early bool

	// ResetBefore reads the whole request body, then drops the connection
	// with a TCP reset without forwarding: the request was not processed.
	ResetBefore bool

	// ResetAfter forwards the request (the backend processes it), then
	// drops the connection with a TCP reset instead of answering: the
	// client cannot tell whether anything happened.
	ResetAfter bool

	// Hang reads the whole request body, then never answers: the handler
	// waits until the client goes away or the server closes.
	Hang bool

	// ResetAt, when positive, reads that many bytes of the request body,
	// then drops the connection with a TCP reset: an upload cut halfway.
	ResetAt int64
}

// status returns a fault that answers code with the given header pairs
// ("Retry-After", "2", ...) and body.
func status(code int, body string, headerPairs ...string) fault {
	f := fault{Status: code, Body: body, Header: make(http.Header)}
	for i := 0; i+1 < len(headerPairs); i += 2 {
		f.Header.Set(headerPairs[i], headerPairs[i+1])
	}
	return f
}

// received is what the faultProxy saw of one request that its script
// applied to.
type received struct {
	Method   string
	Path     string
	Proto    string // "HTTP/1.1" or "HTTP/2.0"
	Header   http.Header
	Body     []byte // the bytes that arrived, all of them when Complete
	Complete bool   // the whole body arrived
	Fault    string // what the proxy did: "forward", "status 503", "reset before", ...
	CheckErr error  // the proxy's check of the request, when it has one
}

// faultProxy is a loopback HTTP server in front of a backend handler. The
// requests that match answer by its script, one fault each; when the
// script is used up they are forwarded. Other requests are always
// forwarded, and not recorded. Its methods are safe for concurrent use.
//
// Every scripted answer that is not forwarded closes its connection
// (Connection: close, or the reset itself), so the next attempt dials
// afresh. That keeps net/http's own re-sends out of the counts: net/http
// sends an idempotent or keyed request again by itself when a reused
// connection drops before any response byte (TestNetHTTPResendsOnItsOwn
// shows it), and those sends are none of the Transport's doing.
type faultProxy struct {
	*httptest.Server
	backend http.Handler
	match   func(*http.Request) bool
	check   func(r *http.Request, body []byte, complete bool) error

	mu     sync.Mutex // protects the fields below
	script []fault
	got    []received
}

// proxyOpts configures a faultProxy.
type proxyOpts struct {
	TLS   bool                                                    // serve HTTPS, HTTP/1.1 only, so that resets reach the TCP connection
	HTTP2 bool                                                    // serve HTTPS with HTTP/2 too; a reset resets the stream
	Match func(*http.Request) bool                                // which requests the script applies to; nil: all
	Check func(r *http.Request, body []byte, complete bool) error // run on every matching request; nil: none
}

// newFaultProxy starts a faultProxy in front of backend and closes it when
// the test ends.
func newFaultProxy(t *testing.T, backend http.Handler, o proxyOpts, script ...fault) *faultProxy {
	t.Helper()
	p := &faultProxy{backend: backend, script: script, match: o.Match, check: o.Check}
	p.Server = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	if o.TLS || o.HTTP2 {
		p.EnableHTTP2 = o.HTTP2
		p.StartTLS()
	} else {
		p.Start()
	}
	t.Cleanup(p.Close)
	return p
}

// Received returns a copy of the records of the matching requests.
func (p *faultProxy) Received() []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]received(nil), p.got...)
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	if p.match != nil && !p.match(r) {
		p.backend.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	var f fault
	if len(p.script) > 0 {
		f = p.script[0]
		p.script = p.script[1:]
	}
	p.mu.Unlock()

	rec, err := p.read(r, f)
	p.mu.Lock()
	p.got = append(p.got, rec)
	p.mu.Unlock()

	switch {
	case err != nil || f.ResetAt > 0 || f.ResetBefore:
		reset(w)
	case f.Hang:
		<-r.Context().Done() // the server cancels it when the client hangs up, or at Close
	case f.ResetAfter:
		r.Body = io.NopCloser(bytes.NewReader(rec.Body))
		p.backend.ServeHTTP(httptest.NewRecorder(), r)
		reset(w)
	case f.Status != 0:
		for k, v := range f.Header {
			w.Header()[k] = v
		}
		w.Header().Set("Connection", "close")
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
	default:
		r.Body = io.NopCloser(bytes.NewReader(rec.Body))
		p.backend.ServeHTTP(w, r)
	}
}

// read reads as much of r's body as f says and records it; err reports a
// client that broke off while sending.
func (p *faultProxy) read(r *http.Request, f fault) (rec received, err error) {
	rec = received{Method: r.Method, Path: r.URL.Path, Proto: r.Proto, Header: r.Header.Clone()}
	switch {
	case f.Early:
		// Nothing read: the body stays in the client, or on the wire.
	case f.ResetAt > 0:
		rec.Body, err = io.ReadAll(io.LimitReader(r.Body, f.ResetAt))
	default:
		rec.Body, err = io.ReadAll(r.Body)
		rec.Complete = err == nil && (r.ContentLength < 0 || int64(len(rec.Body)) == r.ContentLength)
	}
	if p.check != nil {
		rec.CheckErr = p.check(r, rec.Body, rec.Complete)
	}
	rec.Fault = f.String()
	if err != nil {
		rec.Fault = "client broke off: " + err.Error()
	}
	return rec, err
}

// String says what the proxy does for f, as received.Fault records it.
func (f fault) String() string {
	switch {
	case f.ResetAt > 0:
		return "reset at " + strconv.FormatInt(f.ResetAt, 10)
	case f.ResetBefore:
		return "reset before"
	case f.ResetAfter:
		return "reset after"
	case f.Hang:
		return "hang"
	case f.Early:
		return "early status " + strconv.Itoa(f.Status)
	case f.Status != 0:
		return "status " + strconv.Itoa(f.Status)
	}
	return "forward"
}

// reset drops the connection of w with a TCP reset (under TLS, the TCP
// connection beneath). Over HTTP/2, where a handler cannot reach the
// connection, it resets the stream (INTERNAL_ERROR) instead.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = nc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
