package proxies_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// record is what the upstream saw of one request.
type record struct {
	Method        string
	CallID        string // the X-Call-Id header
	ContentLength int64  // the request's Content-Length; -1 when unknown (chunked)
	BodyLen       int64  // the body bytes that arrived
	BodySHA       string // the hex SHA-256 of those bytes
	Complete      bool   // the whole body arrived
}

// reply is the upstream's scripted answer to one request.
type reply struct {
	Delay  time.Duration // wait this long first (cut short when the proxy goes away)
	Status int           // the status to answer; zero means 200
}

// upstream is an HTTP/1.1 server on a fixed loopback address that
// records every request it receives and answers as its script says. It
// can go down (its listener and connections closed: the proxy's connects
// are refused) and come back on the same address. Its methods are safe for
// concurrent use.
type upstream struct {
	t    *testing.T
	addr string // host:port, the same across down and back
	srv  *http.Server
	wg   sync.WaitGroup // the Serve goroutines

	// script answers the n-th request (counting from 1) that carries
	// callID. Nil answers 200 at once. Set before the first request.
	script func(callID string, n int) reply

	mu    sync.Mutex // protects the fields below
	ln    net.Listener
	recs  []record
	conns map[net.Conn]struct{} // open connections, closed by down
	seen  chan struct{}         // closed and replaced on every record
}

// newUpstream starts an upstream on a free loopback port; it is closed when
// the test ends.
func newUpstream(t *testing.T) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{t: t, addr: ln.Addr().String(), conns: make(map[net.Conn]struct{}), seen: make(chan struct{})}
	u.srv = &http.Server{
		Handler:           http.HandlerFunc(u.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         u.track,
	}
	u.listen(ln)
	t.Cleanup(func() {
		_ = u.srv.Close()
		u.wg.Wait()
	})
	return u
}

// listen serves on ln until it closes.
func (u *upstream) listen(ln net.Listener) {
	u.mu.Lock()
	u.ln = ln
	u.mu.Unlock()
	u.wg.Go(func() {
		if err := u.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			u.t.Errorf("upstream: %v", err)
		}
	})
}

// track keeps the open connections, so that down can close them.
func (u *upstream) track(c net.Conn, s http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch s {
	case http.StateNew:
		u.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(u.conns, c)
	}
}

// down closes the listener and every connection: the upstream is gone.
func (u *upstream) down() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ln != nil {
		_ = u.ln.Close()
		u.ln = nil
	}
	for c := range u.conns {
		_ = c.Close()
	}
}

// back listens again on the same address.
func (u *upstream) back() {
	u.t.Helper()
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Errorf("upstream back on %s: %v", u.addr, err)
		return
	}
	u.listen(ln)
}

// serve reads the whole body, records the request, then answers as the
// script says.
func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	rec := record{
		Method:        r.Method,
		CallID:        r.Header.Get("X-Call-Id"),
		ContentLength: r.ContentLength,
		BodyLen:       n,
		BodySHA:       hex.EncodeToString(h.Sum(nil)),
		Complete:      err == nil,
	}
	u.mu.Lock()
	u.recs = append(u.recs, rec)
	nth := 0
	for _, x := range u.recs {
		if x.CallID == rec.CallID {
			nth++
		}
	}
	close(u.seen)
	u.seen = make(chan struct{})
	u.mu.Unlock()

	var rp reply
	if u.script != nil {
		rp = u.script(rec.CallID, nth)
	}
	if rp.Delay > 0 {
		tm := time.NewTimer(rp.Delay)
		select {
		case <-tm.C:
		case <-r.Context().Done():
			tm.Stop()
			return
		}
	}
	if rp.Status == 0 {
		rp.Status = http.StatusOK
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(rp.Status)
	_, _ = io.WriteString(w, rec.CallID+" "+strconv.Itoa(nth)+"\n")
}

// calls returns the records of the requests that carried callID.
func (u *upstream) calls(callID string) []record {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []record
	for _, r := range u.recs {
		if r.CallID == callID {
			out = append(out, r)
		}
	}
	return out
}

// count returns how many requests the upstream received.
func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.recs)
}

// waitCount waits until the upstream received at least n requests.
func (u *upstream) waitCount(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		u.mu.Lock()
		got, seen := len(u.recs), u.seen
		u.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-seen:
		case <-deadline.C:
			return false
		}
	}
}

// bodySum is what the upstream records of a body: its hex SHA-256.
func bodySum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
