// Command breaker shows a circuit breaker composed with retry.Transport:
// the breaker sits inside the retry loop and judges every attempt, and once
// it opens, calls fail at once instead of retrying against a server that is
// down.
//
// Run it with go run . in this directory; it talks to a loopback server it
// starts itself and ends in about a second.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/retrykit/retry"
)

func main() {
	if err := run(os.Stdout, 300*time.Millisecond); err != nil {
		log.Fatal(err)
	}
}

// run plays the demo, writing what happens to w. openFor is the breaker's
// Timeout: how long it stays open before letting a probe through.
func run(out io.Writer, openFor time.Duration) error {
	w := &lockedWriter{w: out} // the server and the client both write
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		status := http.StatusOK
		if down.Load() {
			status = http.StatusServiceUnavailable
		}
		fmt.Fprintf(w, "  server: %s %s -> %d\n", r.Method, r.URL.Path, status)
		rw.WriteHeader(status)
	}))
	defer srv.Close()
	base := srv.Client().Transport

	cb := newBreaker("api", openFor, func(from, to gobreaker.State) {
		fmt.Fprintf(w, "  breaker: %s -> %s\n", from, to)
	})
	client := &http.Client{Transport: retry.NewTransport(breakerRoundTripper{base, cb}, retry.Policy{
		MaxAttempts: 5,
		Base:        10 * time.Millisecond,
		Cap:         50 * time.Millisecond,
		Deadline:    2 * time.Second,
		OnRetry: func(e retry.Event) {
			fmt.Fprintf(w, "  retry: attempt %d failed (%v)\n", e.Attempt, e.Err)
		},
	})}
	get := func(what string) {
		fmt.Fprintln(w, what)
		resp, err := client.Get(srv.URL + "/v1/answer")
		switch {
		case errors.Is(err, gobreaker.ErrOpenState):
			fmt.Fprintln(w, "  => failed fast: the breaker is open")
		case err != nil:
			fmt.Fprintln(w, "  => error:", err)
		default:
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			fmt.Fprintln(w, "  =>", resp.Status)
		}
	}

	get("1. The server is up.")
	down.Store(true)
	get("2. The server goes down: three failed attempts open the breaker, and the fourth fails fast.")
	get("3. While the breaker is open, calls fail at once and the server sees nothing.")
	down.Store(false)
	time.Sleep(openFor + openFor/10)
	get(fmt.Sprintf("4. After %v the breaker lets one probe through; the server is back, so it closes.", openFor))
	return nil
}

// lockedWriter serialises writes from the server's and the client's
// goroutines.
type lockedWriter struct {
	mu sync.Mutex // protects w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
