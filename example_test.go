package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

func ExampleDo() {
	// A fake clock, so that the example does not wait; leave Clock, Sleep
	// and Rand nil in real code.
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}

	calls := 0
	answer, err := retry.Do(context.Background(), p, func(ctx context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
		}
		return "42", nil
	})
	fmt.Println(answer, err)
	fmt.Println("calls:", calls, "slept:", ft.Sleeps())
	// Output:
	// 42 <nil>
	// calls: 3 slept: [500ms 1s]
}

func ExampleNewTransport() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	ft := retrytest.NewFakeTime() // in real code: retry.Policy{}
	client := &http.Client{Transport: retry.NewTransport(nil, retry.Policy{
		MaxAttempts: 3,
		Clock:       ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
	})}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	fmt.Println("requests:", requests.Load())
	// Output:
	// 200 OK hello
	// requests: 2
}

func ExampleTransport_retryAfter() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()

	// The server's hint is a floor for the backoff: the Transport sleeps
	// 2s rather than the 500ms its backoff would give.
	ft := retrytest.NewFakeTime()
	tr := &retry.Transport{Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}}
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL, "application/json", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after sleeping", ft.Sleeps())
	// Output:
	// 200 OK after sleeping [2s]
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		{"Retry-After-Ms": {"1500"}},
		{"Retry-After": {"120"}},
		{"Retry-After": {"Thu, 01 Jan 2026 00:00:30 GMT"}},
		{"Retry-After": {"soon"}},
	} {
		fmt.Println(retry.ParseRetryAfter(h, now))
	}
	// Output:
	// 1.5s true
	// 2m0s true
	// 30s true
	// 0s false
}

func ExampleBackoff() {
	// With the jitter factor fixed at 1, each delay sits on its bound.
	one := func() float64 { return 1 }
	for attempt := 1; attempt <= 4; attempt++ {
		fmt.Println(retry.Backoff(attempt, 500*time.Millisecond, 30*time.Second, one))
	}
	// Output:
	// 500ms
	// 1s
	// 2s
	// 4s
}

func ExampleIsRetryable() {
	for _, err := range []error{
		&retry.StatusError{StatusCode: http.StatusTooManyRequests},
		&retry.StatusError{StatusCode: http.StatusServiceUnavailable},
		&retry.StatusError{StatusCode: http.StatusNotImplemented},
		&retry.StatusError{StatusCode: http.StatusNotFound},
		context.DeadlineExceeded,
		context.Canceled,
		errors.New("invalid API key"),
	} {
		fmt.Printf("%-52v %v\n", err, retry.IsRetryable(err))
	}
	// Output:
	// retry: HTTP 429 Too Many Requests                    true
	// retry: HTTP 503 Service Unavailable                  true
	// retry: HTTP 501 Not Implemented                      false
	// retry: HTTP 404 Not Found                            false
	// context deadline exceeded                            true
	// context canceled                                     false
	// invalid API key                                      false
}

// ExampleLogOutcomes: a POST answered 503 is not sent again without an
// idempotency key, and LogOutcomes, as Policy.OnDone, says so in one line.
func ExampleLogOutcomes() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_42")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "host" {
				return slog.Attr{} // left out, so that the output is the same on every run
			}
			return a
		},
	}))
	client := &http.Client{Transport: &retry.Transport{Policy: retry.Policy{OnDone: retry.LogOutcomes(logger)}}}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// level=WARN msg="not retried" reason=not_replayable attempts=1 status=503 request_id=req_42 error="retry: HTTP 503 Service Unavailable"
	// 503
}
