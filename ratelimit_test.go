package retry_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// resetIn is an x-ratelimit-reset value d after the FakeTime's start.
func resetIn(d time.Duration) string {
	return strconv.FormatInt(retrytest.NewFakeTime().Clock.Now().Add(d).Unix(), 10)
}

// headerOf builds a header from pairs of key and value.
func headerOf(pairs ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h
}

func TestIsRetryableServerWordAndRateLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		hint   time.Duration // StatusError.RetryAfter
		header http.Header   // nil: no Response
		want   bool
	}{
		{name: "Stripe false overrides 500", status: 500,
			header: headerOf("Stripe-Should-Retry", "false"), want: false},
		{name: "Stripe true overrides 409", status: 409,
			header: headerOf("Stripe-Should-Retry", "true"), want: true},
		{name: "Stripe garbage leaves the status rule", status: 409,
			header: headerOf("Stripe-Should-Retry", "yes"), want: false},
		{name: "both true", status: 409,
			header: headerOf("X-Should-Retry", "true", "Stripe-Should-Retry", "true"), want: true},
		{name: "x-should-retry true, Stripe false: false wins", status: 503,
			header: headerOf("X-Should-Retry", "true", "Stripe-Should-Retry", "false"), want: false},
		{name: "x-should-retry false, Stripe true: false wins", status: 409,
			header: headerOf("X-Should-Retry", "false", "Stripe-Should-Retry", "true"), want: false},
		{name: "x-should-retry garbage, Stripe true", status: 409,
			header: headerOf("X-Should-Retry", "maybe", "Stripe-Should-Retry", "true"), want: true},
		{name: "plain 403 is final", status: 403, header: headerOf(), want: false},
		{name: "403 without a Response is final", status: 403, want: false},
		{name: "403 with a hint and no Response", status: 403, hint: time.Second, want: true},
		{name: "403 with Retry-After", status: 403,
			header: headerOf("Retry-After", "60"), want: true},
		{name: "403 with Retry-After 0", status: 403,
			header: headerOf("Retry-After", "0"), want: true},
		{name: "403 with a Retry-After date", status: 403,
			header: headerOf("Retry-After", "Thu, 01 Jan 2026 00:00:30 GMT"), want: true},
		{name: "403 with retry-after-ms 0", status: 403,
			header: headerOf("Retry-After-Ms", "0"), want: true},
		{name: "403 with a malformed Retry-After", status: 403,
			header: headerOf("Retry-After", "soon"), want: false},
		{name: "403 with a negative Retry-After", status: 403,
			header: headerOf("Retry-After", "-1"), want: false},
		{name: "403 with remaining 0", status: 403,
			header: headerOf("X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", resetIn(time.Hour)), want: true},
		{name: "403 with remaining 0 and no reset", status: 403,
			header: headerOf("X-Ratelimit-Remaining", "0"), want: true},
		{name: "403 with remaining left", status: 403,
			header: headerOf("X-Ratelimit-Remaining", "12", "X-Ratelimit-Reset", resetIn(time.Hour)), want: false},
		{name: "403 with remaining garbage", status: 403,
			header: headerOf("X-Ratelimit-Remaining", "none"), want: false},
		{name: "403 rate limit, but the server says false", status: 403,
			header: headerOf("Retry-After", "1", "X-Should-Retry", "false"), want: false},
		{name: "401 with Retry-After stays final", status: 401,
			header: headerOf("Retry-After", "1"), want: false},
		{name: "404 with remaining 0 stays final", status: 404,
			header: headerOf("X-Ratelimit-Remaining", "0"), want: false},
		{name: "429 with remaining 0", status: 429,
			header: headerOf("X-Ratelimit-Remaining", "0"), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			se := &retry.StatusError{StatusCode: tt.status, RetryAfter: tt.hint}
			if tt.header != nil {
				se.Response = &http.Response{StatusCode: tt.status, Header: tt.header}
			}
			if got := retry.IsRetryable(se); got != tt.want {
				t.Errorf("IsRetryable(%d, %v) = %v, want %v", tt.status, tt.header, got, tt.want)
			}
		})
	}
}

// statusCase is a request answered first by a scripted status, then 200.
type statusCase struct {
	name       string
	method     string
	header     http.Header // of the request
	first      retrytest.Step
	wantSends  int
	wantStatus int
	wantSleeps []time.Duration
	wantHinted []bool
}

var keyedHeader = http.Header{"Idempotency-Key": {"k1"}}

func TestTransportServerWord(t *testing.T) {
	t.Parallel()
	runStatusCases(t, []statusCase{
		{name: "keyed POST, 500 with Stripe-Should-Retry false, is not retried",
			method: http.MethodPost, header: keyedHeader,
			first:     retrytest.Status(500, "Stripe-Should-Retry", "false"),
			wantSends: 1, wantStatus: 500},
		{name: "bare POST, 409 with Stripe-Should-Retry true, is re-sent",
			method:    http.MethodPost,
			first:     retrytest.Status(409, "Stripe-Should-Retry", "true"),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "GET, 503 where the two headers disagree, is not retried",
			method:    http.MethodGet,
			first:     retrytest.Status(503, "X-Should-Retry", "true", "Stripe-Should-Retry", "false"),
			wantSends: 1, wantStatus: 503},
	})
}

func TestTransportRateLimits(t *testing.T) {
	t.Parallel()
	runStatusCases(t, []statusCase{
		{name: "429 with a reset an hour away comes back at once",
			method: http.MethodGet,
			first: retrytest.Status(429, "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", resetIn(time.Hour)),
			wantSends: 1, wantStatus: 429},
		{name: "429 with a reset 2s away waits for it",
			method: http.MethodGet,
			first: retrytest.Status(429, "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", resetIn(2*time.Second)),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "429 with a reset in seconds from now waits for it",
			method:    http.MethodGet,
			first:     retrytest.Status(429, "X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "3"),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{3 * time.Second}, wantHinted: []bool{true}},
		{name: "403 with a reset 2s away waits for it, and a POST is re-sent",
			method: http.MethodPost,
			first: retrytest.Status(403, "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", resetIn(2*time.Second)),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "Retry-After comes before the reset",
			method: http.MethodGet,
			first: retrytest.Status(429, "Retry-After", "3", "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", resetIn(time.Hour)),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{3 * time.Second}, wantHinted: []bool{true}},
		{name: "a malformed Retry-After leaves the reset",
			method: http.MethodGet,
			first: retrytest.Status(429, "Retry-After", "soon", "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", resetIn(4*time.Second)),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{4 * time.Second}, wantHinted: []bool{true}},
		{name: "a reset in the past gives no hint",
			method: http.MethodGet,
			first: retrytest.Status(429, "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", resetIn(-time.Minute)),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "a reset with remaining left is no hint",
			method: http.MethodGet,
			first: retrytest.Status(429, "X-Ratelimit-Remaining", "3",
				"X-Ratelimit-Reset", resetIn(time.Hour)),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "a negative reset is no hint",
			method:    http.MethodGet,
			first:     retrytest.Status(429, "X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "-5"),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "a fractional reset is no hint",
			method:    http.MethodGet,
			first:     retrytest.Status(429, "X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "1767225602.5"),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "an absurd reset gives up at once",
			method: http.MethodGet,
			first: retrytest.Status(429, "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", strings.Repeat("9", 40)),
			wantSends: 1, wantStatus: 429},
		{name: "a reset past year 9999 gives up at once",
			method: http.MethodGet,
			first: retrytest.Status(429, "X-Ratelimit-Remaining", "0",
				"X-Ratelimit-Reset", "9223372036854775807"),
			wantSends: 1, wantStatus: 429},
		{name: "403 secondary limit with Retry-After re-sends a POST",
			method:    http.MethodPost,
			first:     retrytest.Status(403, "Retry-After", "3"),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{3 * time.Second}, wantHinted: []bool{true}},
		{name: "403 with Retry-After 0 re-sends a POST after the backoff",
			method:    http.MethodPost,
			first:     retrytest.Status(403, "Retry-After", "0"),
			wantSends: 2, wantStatus: 200,
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "plain 403 is final",
			method:    http.MethodGet,
			first:     retrytest.Status(403),
			wantSends: 1, wantStatus: 403},
		{name: "403 with a reset but remaining left is final",
			method:    http.MethodGet,
			first:     retrytest.Status(403, "X-Ratelimit-Remaining", "4", "X-Ratelimit-Reset", resetIn(time.Second)),
			wantSends: 1, wantStatus: 403},
	})
}

// runStatusCases sends each case's request through a Transport on fake
// time and checks the sends, the status, the sleeps and their hints.
func runStatusCases(t *testing.T, tests []statusCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.first, retrytest.Status(200))
			ft := retrytest.NewFakeTime()
			var hinted []bool
			client := &http.Client{Transport: &retry.Transport{Policy: retry.Policy{
				Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
				OnRetry: func(e retry.Event) { hinted = append(hinted, e.FromRetryAfter) },
			}}}
			req, err := http.NewRequest(tt.method, srv.URL, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := srv.Requests(); got != tt.wantSends {
				t.Errorf("sends = %d, want %d", got, tt.wantSends)
			}
			if diff := cmp.Diff(tt.wantSleeps, ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHinted, hinted); diff != "" {
				t.Errorf("FromRetryAfter (-want +got):\n%s", diff)
			}
		})
	}
}
