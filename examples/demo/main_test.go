package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDemo plays the demo and checks each scenario's timeline: the attempts
// made, the delays and where they came from, the streamed text, and the
// paced callers' counts. The scripted calls do not wait; the paced callers
// wait in real time, as the server's rate limit refills in real time.
func TestDemo(t *testing.T) {
	var out strings.Builder
	var sleeps []time.Duration
	sleep := func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		return ctx.Err()
	}
	if err := run(&out, sleep); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"attempt 3: GET /v1/models -> 200 OK",
		"waiting 1s from the server's Retry-After hint",
		"returned 500 Internal Server Error after 1 attempt(s)",
		"not retried: a POST without an Idempotency-Key",
		"retrying: HTTP 503 Service Unavailable is retryable",
		`returned 200 OK after 2 attempt(s): {"text":"Hello!"}`,
		"waiting 300ms from the server's Retry-After hint",
		`returned 200 OK after 2 attempt(s): {"text":"Hello again!"}`,
		// The stream: its first attempt is a 200 whose first event is an
		// error, retried before the caller sees a byte of it.
		"attempt 1: POST /v1/messages -> 200 OK (text/event-stream)",
		"retrying: an overloaded_error event before the first token (HTTP 529 Overloaded) is retryable",
		"attempt 2: POST /v1/messages -> 200 OK (text/event-stream)",
		`token: ", streamed"`,
		`returned 200 OK after 2 attempt(s), one whole stream: "Hello, streamed world!"`,
		// The paced callers: none refused.
		"17 calls, 0 failed: 17 requests served, 0 refused with 429",
		"pacing: a call waits",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; output:\n%s", want, got)
		}
	}
	if strings.Contains(got, "retrying: retry:") {
		t.Errorf("output repeats the prefix; output:\n%s", got)
	}
	if n := len(regexp.MustCompile(`(?m)attempt \d+: `).FindAllString(got, -1)); n != 10 {
		t.Errorf("%d attempts printed, want 10 (3 + 1 + 2 + 2 + 2); output:\n%s", n, got)
	}
	if n := strings.Count(got, "token: "); n != 4 {
		t.Errorf("%d tokens printed, want 4: the failed stream's events must not reach the caller; output:\n%s", n, got)
	}
	// Without the Pacer the same callers are refused: the server's limit is
	// real, and the Pacer is what kept the calls under it.
	m := regexp.MustCompile(`without the Pacer, not retried: 16 calls, (\d+) failed: (\d+) served, (\d+) refused`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("output lacks the calls without the Pacer; output:\n%s", got)
	}
	failed, _ := strconv.Atoi(m[1])
	refused, _ := strconv.Atoi(m[3])
	if refused == 0 || failed != refused {
		t.Errorf("without the Pacer: %d calls failed, %d requests refused; want some refused, each a failed call", failed, refused)
	}

	// Backoff delays are random; the hints are exact.
	if len(sleeps) != 5 {
		t.Fatalf("sleeps = %v, want 5", sleeps)
	}
	hinted := []time.Duration{sleeps[1], sleeps[3]}
	if diff := cmp.Diff([]time.Duration{time.Second, 300 * time.Millisecond}, hinted); diff != "" {
		t.Errorf("hinted sleeps (-want +got):\n%s", diff)
	}
	for _, i := range []int{0, 2, 4} {
		if bound := 200 * time.Millisecond; sleeps[i] < 0 || sleeps[i] > bound {
			t.Errorf("backoff sleep %d = %v, want within [0, %v]", i, sleeps[i], bound)
		}
	}
}
