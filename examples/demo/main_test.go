package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDemo plays the demo without waiting and checks each scenario's
// timeline: the attempts made, the delays and where they came from.
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
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; output:\n%s", want, got)
		}
	}
	if strings.Contains(got, "retrying: retry:") {
		t.Errorf("output repeats the prefix; output:\n%s", got)
	}
	if n := len(regexp.MustCompile(`(?m)attempt \d+: `).FindAllString(got, -1)); n != 8 {
		t.Errorf("%d attempts printed, want 8 (3 + 1 + 2 + 2); output:\n%s", n, got)
	}
	// Backoff delays are random; the hints are exact.
	if len(sleeps) != 4 {
		t.Fatalf("sleeps = %v, want 4", sleeps)
	}
	hinted := []time.Duration{sleeps[1], sleeps[3]}
	if diff := cmp.Diff([]time.Duration{time.Second, 300 * time.Millisecond}, hinted); diff != "" {
		t.Errorf("hinted sleeps (-want +got):\n%s", diff)
	}
	for _, i := range []int{0, 2} {
		if bound := 200 * time.Millisecond; sleeps[i] < 0 || sleeps[i] > bound {
			t.Errorf("backoff sleep %d = %v, want within [0, %v]", i, sleeps[i], bound)
		}
	}
}
