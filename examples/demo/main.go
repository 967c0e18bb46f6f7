// Command demo sends real requests through retry.Transport to a flaky,
// LLM-like API on loopback and prints a timeline of each call: every
// attempt and its outcome, why it was or was not retried, and each delay
// with where it came from.
//
//	go run ./examples/demo
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/retrykit/retry"
)

// answer is one scripted reply of the flaky server.
type answer struct {
	status int
	header map[string]string
	body   string
}

// scenario is one call of the demo and the replies the server gives it.
type scenario struct {
	title   string
	method  string
	key     bool // send an Idempotency-Key
	answers []answer
}

var scenarios = []scenario{
	{
		title: "GET a model list: overloaded, then rate-limited, then fine", method: http.MethodGet,
		answers: []answer{
			{status: 503, body: `{"error":"overloaded"}`},
			{status: 429, header: map[string]string{"Retry-After": "1"}, body: `{"error":"rate limited"}`},
			{status: 200, body: `{"data":["model-a","model-b"]}`},
		},
	},
	{
		title: "POST a completion without an Idempotency-Key: a 500 is not sent again", method: http.MethodPost,
		answers: []answer{
			{status: 500, body: `{"error":"internal"}`},
			{status: 200, body: `{"text":"never reached"}`},
		},
	},
	{
		title: "The same POST with an Idempotency-Key: retried to success", method: http.MethodPost, key: true,
		answers: []answer{
			{status: 500, body: `{"error":"internal"}`},
			{status: 200, body: `{"text":"Hello!"}`},
		},
	},
	{
		title: "POST without a key, rate-limited with retry-after-ms: a 429 proves it was not processed", method: http.MethodPost,
		answers: []answer{
			{status: 429, header: map[string]string{"Retry-After-Ms": "300"}, body: `{"error":"rate limited"}`},
			{status: 200, body: `{"text":"Hello again!"}`},
		},
	},
}

func main() {
	if err := run(os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// run plays every scenario, printing to w. sleep replaces the real wait
// between attempts when it is not nil (the demo's test passes one, so it
// never waits).
func run(w io.Writer, sleep func(context.Context, time.Duration) error) error {
	srv, err := startServer()
	if err != nil {
		return err
	}
	defer srv.close()

	for i, sc := range scenarios {
		srv.play(sc.answers)
		fmt.Fprintf(w, "\n%d. %s\n", i+1, sc.title)
		if err := call(w, srv.url, sc, sleep); err != nil {
			return err
		}
	}
	return nil
}

// call sends one scenario's request and prints its timeline.
func call(w io.Writer, url string, sc scenario, sleep func(context.Context, time.Duration) error) error {
	start := time.Now()
	stamp := func() string { return fmt.Sprintf("  %6.3fs", time.Since(start).Seconds()) }
	attempts := 0
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		attempts++
		resp, err := http.DefaultTransport.RoundTrip(req)
		switch {
		case err != nil:
			fmt.Fprintf(w, "%s  attempt %d: %s %s -> error: %v\n", stamp(), attempts, req.Method, req.URL.Path, err)
		default:
			fmt.Fprintf(w, "%s  attempt %d: %s %s -> %s%s\n", stamp(), attempts, req.Method, req.URL.Path,
				resp.Status, hints(resp.Header))
		}
		return resp, err
	})
	client := &http.Client{Transport: &retry.Transport{
		Base: base,
		Policy: retry.Policy{
			MaxAttempts: 4,
			Base:        200 * time.Millisecond,
			Cap:         2 * time.Second,
			Deadline:    10 * time.Second,
			Sleep:       sleep,
			OnRetry: func(e retry.Event) {
				from := "backoff (full jitter)"
				if e.FromRetryAfter {
					from = "the server's Retry-After hint"
				}
				fmt.Fprintf(w, "%s  retrying: %s is retryable; waiting %v from %s\n",
					stamp(), failure(e.Err), e.Delay.Round(time.Millisecond), from)
			},
		},
	}}

	req, err := http.NewRequest(sc.method, url+"/v1/chat/completions", strings.NewReader(`{"prompt":"Hi"}`))
	if err != nil {
		return err
	}
	if sc.method == http.MethodGet {
		req, err = http.NewRequest(sc.method, url+"/v1/models", nil)
		if err != nil {
			return err
		}
	}
	if sc.key {
		req.Header.Set("Idempotency-Key", retry.NewIdempotencyKey())
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(w, "%s  gave up: %v\n", stamp(), err)
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s  returned %s after %d attempt(s): %s\n", stamp(), resp.Status, attempts, body)
	if resp.StatusCode >= 500 && attempts == 1 && sc.method == http.MethodPost && !sc.key {
		fmt.Fprintf(w, "%s  not retried: a POST without an Idempotency-Key may have been processed before the 500,\n"+
			"            and sending it again could do the work twice\n", stamp())
	}
	return nil
}

// hints shows the retry hints a response carries.
func hints(h http.Header) string {
	var parts []string
	for _, k := range []string{"Retry-After", "Retry-After-Ms"} {
		if v := h.Get(k); v != "" {
			parts = append(parts, k+": "+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// server is the flaky API: it answers each request with the next scripted
// answer.
type server struct {
	url string
	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	answers []answer
}

func startServer() (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String(), ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *server) play(answers []answer) {
	s.mu.Lock()
	s.answers = answers
	s.mu.Unlock()
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	a := answer{status: http.StatusOK}
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (s *server) close() { _ = s.srv.Close() }

// failure names a retried failure for the timeline. A *retry.StatusError
// becomes its status ("HTTP 503 Service Unavailable"): its Error text starts
// with "retry:", which after "retrying:" would read twice.
func failure(err error) string {
	var se *retry.StatusError
	if errors.As(err, &se) {
		return "HTTP " + se.Message
	}
	return err.Error()
}
