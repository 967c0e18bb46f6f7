package retrytest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// memoryHost is the host of every in-memory server. The .invalid top-level
// domain never resolves (RFC 6761), so a client that was not built by the
// server fails at once instead of reaching some real host.
const memoryHost = "retrytest.invalid"

// NewMemoryServer starts an HTTP/1.1 [Server] that plays steps like
// [NewServer], but over in-memory connections ([net.Pipe]) instead of
// loopback sockets, and closes it when the test ends. Only its Client (or
// that client's Transport, as the base of a retrying transport) reaches it:
// the client dials the server in memory whatever the URL says.
//
// Its point is [testing/synctest]. Nothing in it waits on a socket or the
// operating system, so when it is started inside a synctest bubble, a Step
// that hangs, stalls or waits (Hang, Stall, Delay, Dribble) blocks only on
// channels and timers of the bubble, and the bubble's fake clock jumps past
// it: a test of an attempt timeout against a hanging server takes
// milliseconds of real time. Start it, and build the client, inside the
// bubble (within the function given to synctest.Test).
//
// Reset and ResetAfter close the in-memory connection: the client sees the
// connection end (io.EOF or io.ErrUnexpectedEOF) rather than a TCP reset
// (ECONNRESET).
func NewMemoryServer(t testing.TB, steps ...Step) *Server {
	t.Helper()
	l := &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
	s := newServer(steps)
	s.Server = &httptest.Server{
		Listener: l,
		Config:   &http.Server{Handler: http.HandlerFunc(s.serve), ConnState: s.connState},
	}
	s.Start()
	// Start built the client; point it at the listener. Keep-alives stay
	// on, so Conns counts connections as it does on loopback.
	s.Client().Transport.(*http.Transport).DialContext = l.dial
	s.closeAtEnd(t)
	return s
}

// errListenerClosed is what dialing or accepting reports once the in-memory
// server has closed.
var errListenerClosed = errors.New("retrytest: in-memory server closed")

// pipeListener hands the server end of each net.Pipe a client dials to the
// http.Server's Accept loop. It blocks only on channels, which a synctest
// bubble can see through. Safe for concurrent use.
type pipeListener struct {
	conns     chan net.Conn // server ends, from dial to Accept
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// Accept returns the server end of the next dialed connection.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, errListenerClosed
	}
}

// Close stops Accept and dial; connections already made stay open.
func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// Addr names the server; the URL built from it is http://retrytest.invalid.
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is the client's DialContext: it makes a pipe and waits until the
// server accepts its other end.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	var err error
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		err = errListenerClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	_ = client.Close()
	_ = server.Close()
	return nil, err
}

// pipeAddr is the address of both ends of every in-memory connection.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return memoryHost }
