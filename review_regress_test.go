package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/retrytest"
)

// TestPeekNeverHandsBackACutBody: with Policy.Retryable set, the Transport
// reads the start of an error body under the attempt timeout. When the
// timeout fires during that read, the body is cut, so the response is not
// handed back: the attempt counts as timed out. A body that arrives in
// time is handed back whole.
func TestPeekNeverHandsBackACutBody(t *testing.T) {
	slow := retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":`)
		http.NewResponseController(w).Flush()
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `"bad request"}`)
	}}
	srv := retrytest.NewServer(t, slow, retrytest.Step{Status: http.StatusBadRequest, Body: `{"error":"bad request"}`})
	ft := retrytest.NewFakeTime()
	tr := &Transport{Policy: Policy{AttemptTimeout: 100 * time.Millisecond, Retryable: LLMRetryable,
		Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}}
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != `{"error":"bad request"}` || srv.Requests() != 2 {
		t.Fatalf("body %q, read error %v, %d requests; want the second attempt's whole body after 2",
			body, err, srv.Requests())
	}
}

// TestPeekTimeoutOnBarePostIsReturned: a bare POST whose error body was
// being peeked when the attempt timed out is not sent again; the call ends
// with an error that matches context.DeadlineExceeded.
func TestPeekTimeoutOnBarePostIsReturned(t *testing.T) {
	srv := retrytest.NewServer(t, retrytest.Step{Status: http.StatusTooManyRequests, Stall: true, Body: `{"err`})
	tr := &Transport{Policy: Policy{AttemptTimeout: 50 * time.Millisecond, Retryable: LLMRetryable, MaxAttempts: 2,
		Sleep: func(context.Context, time.Duration) error { return nil }}}
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, strings.NewReader("x")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one matching context.DeadlineExceeded", err)
	}
	// A 429 proves the request was not processed, so it was sent again.
	if srv.Requests() != 2 {
		t.Fatalf("%d requests, want 2", srv.Requests())
	}
}

// stallBody blocks in Read until Close, like a stalled stream.
type stallBody struct {
	once sync.Once
	c    chan struct{}
}

func (b *stallBody) Read([]byte) (int, error) { <-b.c; return 0, io.ErrClosedPipe }
func (b *stallBody) Close() error             { b.once.Do(func() { close(b.c) }); return nil }

type stallBase struct{}

func (stallBase) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: &stallBody{c: make(chan struct{})}}, nil
}

// TestCloseDuringFirstReadWithIdleTimeout: closing a body from another
// goroutine while its first Read waits, the usual way to abort a stream,
// is safe with BodyIdleTimeout set (the race detector checks).
func TestCloseDuringFirstReadWithIdleTimeout(t *testing.T) {
	tr := &Transport{Base: stallBase{}, BodyIdleTimeout: time.Minute}
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://example.invalid/", nil))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("read error %v, want the body's own", err)
	}
}

type baseErr struct{ op string }

func (e *baseErr) Error() string { return "base: " + e.op }

type hangBase struct{ err error }

func (b *hangBase) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, b.err
}

// TestTimeoutKeepsTheBaseError: when the attempt times out and the base
// reports an error of its own, both that error and
// context.DeadlineExceeded are in the chain, and it still counts as the
// attempt's timeout.
func TestTimeoutKeepsTheBaseError(t *testing.T) {
	want := &baseErr{"read"}
	tr := &Transport{Base: &hangBase{err: want}, Policy: Policy{AttemptTimeout: 20 * time.Millisecond, MaxAttempts: 1}}
	_, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://example.invalid/", nil))
	if be, ok := errors.AsType[*baseErr](err); !ok || be != want || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the base's error and DeadlineExceeded in its chain", err)
	}
	if !IsRetryable(err) {
		t.Fatalf("IsRetryable(%v) = false, want true: it is the attempt's own timeout", err)
	}
}

// TestLogRetriesRedactsQuotedURLs: url.Error quotes URLs that hold quotes
// or backslashes; the key in their query never reaches the log either.
func TestLogRetriesRedactsQuotedURLs(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:1/v1?key=SECRET",
		`http://127.0.0.1:1/v1?q="x"&key=SECRET`,
		`http://127.0.0.1:1/v1?q=a\b&key=SECRET`,
		"http://user:SECRET@127.0.0.1:1/v1",
	} {
		err := &url.Error{Op: "Get", URL: raw, Err: errors.New("connection refused")}
		var buf bytes.Buffer
		LogRetries(slog.New(slog.NewTextHandler(&buf, nil)))(Event{Attempt: 1, Err: err})
		if out := buf.String(); strings.Contains(out, "SECRET") || !strings.Contains(out, "127.0.0.1:1/v1") {
			t.Errorf("%q: log %q; want the host and path without the secret", raw, out)
		}
	}
}
