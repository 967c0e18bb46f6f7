// Command demo sends real requests through retry.Transport to a flaky,
// LLM-like API on loopback and prints a timeline of each call: every
// attempt and its outcome, why it was or was not retried, and each delay
// with where it came from. It ends with a streamed answer whose first
// stream fails before its first token, retried unseen, and with callers
// that share an API key and a pace.Pacer, which spaces their calls by the
// rate limit the server announces so that none is refused.
//
//	go run ./examples/demo
package main

import (
	"bufio"
	"context"
	"encoding/json"
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
	events []string // when set, the body is this event stream, sent one event at a time
}

// scenario is one call of the demo and the replies the server gives it.
type scenario struct {
	title   string
	method  string
	key     bool // send an Idempotency-Key
	stream  bool // ask for a streamed message, through a Transport with a Stream
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
	{
		title: "Stream a message: the first stream fails with an overloaded_error before its first token, " +
			"behind a 200; with Transport.Stream set, it is retried unseen", method: http.MethodPost, stream: true,
		answers: []answer{
			{status: 200, events: []string{messageStart, event("error",
				`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}},
			{status: 200, events: streamedText("Hello", ", streamed", " world", "!")},
		},
	},
}

func main() {
	if err := run(os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// run plays every scenario, then the paced callers, printing to w. sleep
// replaces the real wait between the attempts of the scenarios when it is
// not nil (the demo's test passes one, so that they never wait). The paced
// callers always wait in real time: the server's rate limit refills in real
// time.
func run(w io.Writer, sleep func(context.Context, time.Duration) error) error {
	f := new(flaky)
	srv, err := startServer(f)
	if err != nil {
		return err
	}
	defer srv.close()

	for i, sc := range scenarios {
		f.play(sc.answers)
		fmt.Fprintf(w, "\n%d. %s\n", i+1, sc.title)
		if err := call(w, srv.url, sc, sleep); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n%d. ", len(scenarios)+1)
	return paced(w)
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
	client := &http.Client{Transport: newTransport(w, stamp, base, sleep, sc.stream)}
	req, err := newRequest(url, sc)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(w, "%s  gave up: %v\n", stamp(), err)
		return nil
	}
	defer resp.Body.Close()
	if sc.stream {
		text, err := readText(resp.Body, func(token string) { fmt.Fprintf(w, "%s  token: %q\n", stamp(), token) })
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s  returned %s after %d attempt(s), one whole stream: %q\n", stamp(), resp.Status, attempts, text)
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s  returned %s after %d attempt(s): %s\n", stamp(), resp.Status, attempts, b)
	if resp.StatusCode >= 500 && attempts == 1 && sc.method == http.MethodPost && !sc.key {
		fmt.Fprintf(w, "%s  not retried: a POST without an Idempotency-Key may have been processed before the 500,\n"+
			"            and sending it again could do the work twice\n", stamp())
	}
	return nil
}

// newTransport returns the Transport of a scenario's call, sending through
// base and printing each retry to w; with stream, it is set for streamed
// messages.
func newTransport(w io.Writer, stamp func() string, base http.RoundTripper,
	sleep func(context.Context, time.Duration) error, stream bool) *retry.Transport {
	t := &retry.Transport{
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
	}
	if stream {
		// The Transport reads each event stream ahead to its first token:
		// an error event before it is judged as the status it stands for.
		t.Stream = &retry.Stream{Event: retry.LLMEvent}
		// After a 529 the server may have done the work, so a POST is sent
		// again only if it may run twice: generating text may.
		t.Replayable = func(req *http.Request) bool { return req.URL.Path == "/v1/messages" }
	}
	return t
}

// newRequest returns a scenario's request to the server at url.
func newRequest(url string, sc scenario) (*http.Request, error) {
	if sc.method == http.MethodGet {
		return http.NewRequest(sc.method, url+"/v1/models", nil)
	}
	path, body := "/v1/chat/completions", `{"prompt":"Hi"}`
	if sc.stream {
		path, body = "/v1/messages", `{"model":"demo","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	}
	req, err := http.NewRequest(sc.method, url+path, strings.NewReader(body))
	if err == nil && sc.key {
		req.Header.Set("Idempotency-Key", retry.NewIdempotencyKey())
	}
	return req, err
}

// readText reads an Anthropic-style event stream, handing each text token
// to onToken as it arrives, and returns the whole text. Through a Transport
// with a Stream, a stream that fails after its first token, or ends before
// message_stop, fails the read: readText returns that error.
func readText(body io.Reader, onToken func(string)) (string, error) {
	var text strings.Builder
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return "", err
		}
		if ev.Type == "content_block_delta" {
			onToken(ev.Delta.Text)
			text.WriteString(ev.Delta.Text)
		}
	}
	return text.String(), sc.Err()
}

// hints shows the retry hints a response carries, and what an event
// stream is.
func hints(h http.Header) string {
	var parts []string
	for _, k := range []string{"Retry-After", "Retry-After-Ms"} {
		if v := h.Get(k); v != "" {
			parts = append(parts, k+": "+v)
		}
	}
	if ct := h.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		parts = append(parts, ct)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// server is an API on loopback.
type server struct {
	url string
	srv *http.Server
}

// startServer serves h on a loopback port until close.
func startServer(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *server) close() { _ = s.srv.Close() }

// flaky is the flaky API: it answers each request with the next scripted
// answer.
type flaky struct {
	mu      sync.Mutex // protects answers
	answers []answer
}

// play makes answers the replies to the next requests.
func (f *flaky) play(answers []answer) {
	f.mu.Lock()
	f.answers = answers
	f.mu.Unlock()
}

// ServeHTTP answers r with the next scripted answer, or a 200 when there
// is none left; an event stream goes out one event at a time.
func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	a := answer{status: http.StatusOK}
	if len(f.answers) > 0 {
		a, f.answers = f.answers[0], f.answers[1:]
	}
	f.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.events == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(a.status)
	for i, ev := range a.events {
		if i > 0 { // a model writes its tokens one at a time
			select {
			case <-time.After(tokenGap):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, ev)
		_ = http.NewResponseController(w).Flush()
	}
}

// failure names a retried failure for the timeline. A *retry.StatusError
// becomes its status ("HTTP 503 Service Unavailable"): its Error text starts
// with "retry:", which after "retrying:" would read twice. One that an
// event stream's error event stands for, behind a 200, says so.
func failure(err error) string {
	var se *retry.StatusError
	if !errors.As(err, &se) {
		return err.Error()
	}
	if se.Response != nil && se.Response.StatusCode != se.StatusCode {
		var ev struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		_ = json.Unmarshal(se.Body, &ev) // the event's data
		return fmt.Sprintf("an %s event before the first token (HTTP %s)", ev.Error.Type, se.Message)
	}
	return "HTTP " + se.Message
}
