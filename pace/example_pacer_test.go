package pace_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
	"github.com/retrykit/retry/retrytest"
)

func ExamplePacer() {
	// A server that allows 10 requests per 10 seconds and says so the way
	// OpenAI does; this client has used them all.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ratelimit-limit-requests", "10")
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", "10s")
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	// A fake clock, so that the example does not wait; leave Clock and
	// Sleep nil in real code.
	ft := retrytest.NewFakeTime()
	// One Pacer per API key, shared by every client that uses the key.
	pacer := &pace.Pacer{
		OnWait: func(e pace.Event) { fmt.Printf("attempt %d waits %v\n", e.Attempt, e.Delay) },
	}
	client := &http.Client{Transport: &retry.Transport{
		Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep},
		Pacer:  pacer,
	}}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	// Output:
	// attempt 1 waits 1s
	// attempt 1 waits 1s
}

func ExampleLogWaits() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a fixed output for the example
			}
			return a
		},
	}))
	onWait := pace.LogWaits(logger, 5*time.Second)
	onWait(pace.Event{Attempt: 1, Delay: 2 * time.Second, Host: "api.openai.com"}) // too short to log
	onWait(pace.Event{Attempt: 2, Delay: 20 * time.Second, Host: "api.openai.com", RetryAfter: true})
	// Output:
	// level=INFO msg=pacing host=api.openai.com attempt=2 delay=20s retry_after=true
}
