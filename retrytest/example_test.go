package retrytest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// exampleT stands in for the *testing.T that a test passes to NewServer:
// it runs the server's cleanup when the example ends.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()          {}
func (t *exampleT) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

func ExampleNewServer() {
	t := &exampleT{} // in a test: its *testing.T
	defer t.finish()

	// A server that is overloaded once, then answers.
	srv := retrytest.NewServer(t,
		retrytest.Status(http.StatusServiceUnavailable, "Retry-After", "1"),
		retrytest.Step{Body: "ok"},
	)
	for range 3 {
		resp, err := srv.Client().Get(srv.URL + "/v1/models")
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q %q\n", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	fmt.Println("requests:", srv.Requests(), "connections:", srv.Conns())
	// Output:
	// 503 Retry-After="1" ""
	// 200 Retry-After="" "ok"
	// 200 Retry-After="" "ok"
	// requests: 3 connections: 1
}

func ExampleFakeTime() {
	ft := retrytest.NewFakeTime()
	start := ft.Clock.Now()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}

	calls := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		calls++
		return 0, context.DeadlineExceeded // an attempt that timed out, every time
	})
	fmt.Println(calls, "calls:", err)
	// Rand returns 1, so each sleep is the full backoff bound; the clock
	// moved by their sum, and no real time passed.
	fmt.Println(ft.Sleeps(), ft.Clock.Since(start))

	ft.SetRand(func() float64 { return 0.5 })
	fmt.Println(retry.Backoff(1, time.Second, time.Minute, ft.Rand))
	// Output:
	// 5 calls: retry: gave up after 5 attempts (max_attempts): context deadline exceeded
	// [500ms 1s 2s 4s] 7.5s
	// 500ms
}

func ExampleNewMemoryServer() {
	t := &exampleT{} // in a test: its *testing.T, inside the function given to synctest.Test
	defer t.finish()

	srv := retrytest.NewMemoryServer(t,
		retrytest.Status(http.StatusServiceUnavailable, "Retry-After", "1"),
		retrytest.Step{Body: "ok"},
	)
	// Only its Client reaches it: the client dials the server in memory.
	// Use srv.Client().Transport as the Base of a retry.Transport.
	for range 2 {
		resp, err := srv.Client().Get(srv.URL + "/v1/models")
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q %q\n", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	fmt.Println(srv.URL, "requests:", srv.Requests(), "connections:", srv.Conns())
	// Output:
	// 503 Retry-After="1" ""
	// 200 Retry-After="" "ok"
	// http://retrytest.invalid requests: 2 connections: 1
}
