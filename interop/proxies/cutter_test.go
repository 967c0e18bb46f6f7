package proxies_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// cutter is a TCP proxy on a loopback port in front of target. Its first
// connection is reset (RST, not FIN) once it has forwarded after bytes
// from the client: an upload cut partway. Later connections are relayed
// whole. Its methods are safe for concurrent use.
type cutter struct {
	t      *testing.T
	ln     net.Listener
	target string
	after  int64
	conns  atomic.Int32   // connections accepted
	wg     sync.WaitGroup // the relaying goroutines
	mu     sync.Mutex     // protects open
	open   map[net.Conn]struct{}
	closed bool // set when the test ends; guarded by mu
}

// newCutter starts a cutter in front of target; it is closed, its
// connections with it, when the test ends.
func newCutter(t *testing.T, target string, after int64) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{t: t, ln: ln, target: target, after: after, open: make(map[net.Conn]struct{})}
	c.wg.Go(c.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		c.mu.Lock()
		c.closed = true
		for conn := range c.open {
			_ = conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
	return c
}

// addr returns the host:port clients dial.
func (c *cutter) addr() string { return c.ln.Addr().String() }

// accept relays each connection until the listener closes; the first is
// cut.
func (c *cutter) accept() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.t.Errorf("cutter: %v", err)
			}
			return
		}
		n := c.conns.Add(1)
		c.wg.Go(func() { c.relay(client, n == 1) })
	}
}

// track keeps conn to be closed when the test ends; false when it already
// has.
func (c *cutter) track(conns ...net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	for _, conn := range conns {
		c.open[conn] = struct{}{}
	}
	return true
}

// untrack closes conns and forgets them.
func (c *cutter) untrack(conns ...net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range conns {
		delete(c.open, conn)
		_ = conn.Close()
	}
}

// relay copies both ways between client and a new connection to the
// target; cut resets both after c.after bytes from the client.
func (c *cutter) relay(client net.Conn, cut bool) {
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		c.t.Errorf("cutter: %v", err)
		_ = client.Close()
		return
	}
	if !c.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	defer c.untrack(client, server)
	if cut {
		_, _ = io.CopyN(server, client, c.after)
		// SetLinger(0): Close sends RST, so the client's next write or
		// read fails with ECONNRESET.
		_ = client.(*net.TCPConn).SetLinger(0)
		_ = server.(*net.TCPConn).SetLinger(0)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	c.wg.Go(func() { pipe(server, client) })
	c.wg.Go(func() { pipe(client, server) })
	<-done // one way ended: untrack closes both, which ends the other
}
