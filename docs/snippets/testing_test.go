package snippets_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// The snippets of docs/testing.md that use FakeTime. The synctest one is
// in retrytest/memory_test.go.

func TestClientRetries(t *testing.T) {
	srv := retrytest.NewServer(t,
		retrytest.Status(503),
		retrytest.Status(429, "Retry-After", "2"),
		retrytest.Step{Body: `{"ok":true}`},
	)
	ft := retrytest.NewFakeTime() // Clock, Sleep and Rand for the Policy: sleeps take no time
	client := &http.Client{Transport: &retry.Transport{
		Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
	}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` {
		t.Errorf("got %d %s, want 200 {\"ok\":true}", resp.StatusCode, body)
	}
	if got := srv.Requests(); got != 3 {
		t.Errorf("server saw %d requests, want 3", got)
	}
	// Rand returns 1: the first delay is the whole backoff bound (500 ms);
	// the second is the server's hint, a floor above the 1 s bound.
	want := []time.Duration{500 * time.Millisecond, 2 * time.Second}
	if diff := cmp.Diff(want, ft.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
}
