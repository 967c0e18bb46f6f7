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
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

func ExampleLLMRetryable() {
	quota := &retry.StatusError{StatusCode: http.StatusTooManyRequests,
		Body: []byte(`{"error":{"type":"insufficient_quota","message":"You exceeded your current quota"}}`)}
	rateLimited := &retry.StatusError{StatusCode: http.StatusTooManyRequests,
		Body: []byte(`{"error":{"type":"rate_limit_exceeded"}}`)}
	overloaded := &retry.StatusError{StatusCode: 529}

	fmt.Println("quota used up:", retry.LLMRetryable(quota))
	fmt.Println("rate limited: ", retry.LLMRetryable(rateLimited))
	fmt.Println("overloaded:   ", retry.LLMRetryable(overloaded))
	// Output:
	// quota used up: false
	// rate limited:  true
	// overloaded:    true
}

func ExampleNewIdempotencyKey() {
	key := retry.NewIdempotencyKey()
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	fmt.Println(len(key), uuid4.MatchString(key), key != retry.NewIdempotencyKey())
	// Output:
	// 36 true true
}

// A POST is sent again after a 500 only when it carries an idempotency key:
// IdempotencyKey adds one, the same on every attempt.
func ExampleTransport_idempotencyKey() {
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "charged once")
	}))
	defer srv.Close()

	ft := retrytest.NewFakeTime() // in real code: leave Clock, Sleep and Rand nil
	client := &http.Client{Transport: &retry.Transport{
		Policy:         retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
		IdempotencyKey: retry.NewIdempotencyKey,
	}}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body), "after", len(keys), "requests; same key:", keys[0] == keys[1] && keys[0] != "")
	// Output:
	// charged once after 2 requests; same key: true
}

// Text generation may run twice: Replayable says so, and a 500 on a chat
// completion (a POST) is retried.
func ExampleTransport_replayable() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{"text":"Hello!"}`)
	}))
	defer srv.Close()

	ft := retrytest.NewFakeTime()
	client := &http.Client{Transport: &retry.Transport{
		Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
		Replayable: func(req *http.Request) bool {
			return strings.HasSuffix(req.URL.Path, "/chat/completions")
		},
	}}
	resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body), "requests:", requests.Load())
	// Output:
	// 200 OK {"text":"Hello!"} requests: 2
}

// A stream that stops delivering bytes fails after BodyIdleTimeout instead
// of hanging.
func ExampleTransport_bodyIdleTimeout() {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: Hel\n\n")
		http.NewResponseController(w).Flush()
		select { // then silence
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	client := &http.Client{Transport: &retry.Transport{BodyIdleTimeout: 50 * time.Millisecond}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fmt.Printf("%q\n", body)
	fmt.Println(err, errors.Is(err, retry.ErrBodyIdle), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// "data: Hel\n\n"
	// retry: response body idle for 50ms true true
}

func ExampleLogRetries() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, OnRetry: retry.LogRetries(logger)}
	calls := 0
	_, _ = retry.Do(context.Background(), p, func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", &retry.StatusError{StatusCode: http.StatusTooManyRequests, RetryAfter: 2 * time.Second}
		}
		return "ok", nil
	})
	// Output:
	// level=WARN msg=retrying attempt=1 delay=2s delay_source=retry-after status=429 error="retry: HTTP 429 Too Many Requests"
}

// A give-up is a *retry.Error: it says why, after how many attempts, and
// wraps the last error.
func ExampleError() {
	ft := retrytest.NewFakeTime()
	p := retry.Policy{MaxAttempts: 3, Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		return 0, &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
	})
	var rerr *retry.Error
	var serr *retry.StatusError
	fmt.Println(errors.As(err, &rerr), rerr.Reason, rerr.Attempts)
	fmt.Println(errors.As(err, &serr), serr.StatusCode)
	fmt.Println(err)
	// Output:
	// true max_attempts 3
	// true 503
	// retry: gave up after 3 attempts (max_attempts): retry: HTTP 503 Service Unavailable
}

// RetryAfterJitter spreads clients that all received the same hint.
func ExamplePolicy_retryAfterJitter() {
	ft := retrytest.NewFakeTime() // Rand returns 1: the largest jitter
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, RetryAfterJitter: 0.1}
	calls := 0
	_, _ = retry.Do(context.Background(), p, func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", &retry.StatusError{StatusCode: http.StatusTooManyRequests, RetryAfter: 10 * time.Second}
		}
		return "ok", nil
	})
	fmt.Println(ft.Sleeps())
	// Output:
	// [11s]
}
