package main

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// harness is the example's Anthropic client, SDK retries off, talking to a
// scripted server, with fake time in the policy so that nothing waits.
type harness struct {
	srv    *retrytest.Server
	ft     *retrytest.FakeTime
	client anthropic.Client

	mu     sync.Mutex // protects events
	events []retry.Event
}

// newHarness builds the client as main does. tweak, when not nil, changes
// the policy or the transport before the client is made.
func newHarness(t *testing.T, tweak func(*retry.Transport), steps ...retrytest.Step) *harness {
	t.Helper()
	h := &harness{srv: retrytest.NewServer(t, steps...), ft: retrytest.NewFakeTime()}
	p := newPolicy(slog.New(slog.DiscardHandler))
	p.Clock, p.Sleep, p.Rand = h.ft.Clock, h.ft.Sleep, h.ft.Rand
	logRetry := p.OnRetry
	p.OnRetry = func(e retry.Event) {
		logRetry(e)
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
	}
	tr := newTransport(p)
	if tweak != nil {
		tweak(tr)
	}
	h.client = newClient("sk-ant-test", h.srv.URL, tr)
	return h
}

func (h *harness) ask(t *testing.T) (string, error) {
	t.Helper()
	m, err := h.client.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	})
	if err != nil {
		return "", err
	}
	return text(m), nil
}

// fromRetryAfter lists, for each retry so far, whether the server's hint
// set its delay.
func (h *harness) fromRetryAfter() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var got []bool
	for _, e := range h.events {
		got = append(got, e.FromRetryAfter)
	}
	return got
}

// checkSameRequests fails unless the server received n requests, all with
// the body of the first and the SDK's own retry count at 0: every repeat
// was ours, none the SDK's.
func checkSameRequests(t *testing.T, srv *retrytest.Server, n int) {
	t.Helper()
	got := srv.Received()
	if len(got) != n {
		t.Fatalf("server received %d requests, want %d", len(got), n)
	}
	for i, r := range got {
		if r.Method != http.MethodPost || r.Path != "/v1/messages" {
			t.Errorf("request %d: %s %s, want POST /v1/messages", i+1, r.Method, r.Path)
		}
		if diff := cmp.Diff(string(got[0].Body), string(r.Body)); diff != "" {
			t.Errorf("request %d body differs from the first (-want +got):\n%s", i+1, diff)
		}
		if c := r.Header.Get("X-Stainless-Retry-Count"); c != "0" {
			t.Errorf("request %d: X-Stainless-Retry-Count = %q, want \"0\" (the SDK must not retry)", i+1, c)
		}
	}
}

func TestRetriesUntilAnswer(t *testing.T) {
	t.Parallel()
	const answer = "Hello, tested world."
	tests := []struct {
		name       string
		hint       string  // retry-after-ms of the 429
		jitter     float64 // Policy.RetryAfterJitter
		wantSleeps []time.Duration
		wantHinted []bool
	}{{
		name: "hint above the backoff is the delay",
		hint: "1500", jitter: 0,
		// Rand is 1: the backoff bounds are 500ms, then 1s.
		wantSleeps: []time.Duration{1500 * time.Millisecond, time.Second},
		wantHinted: []bool{true, false},
	}, {
		name: "hint above the backoff, with the example's jitter",
		hint: "1500", jitter: 0.1,
		wantSleeps: []time.Duration{1650 * time.Millisecond, time.Second}, // 1500ms + 10% at Rand 1
		wantHinted: []bool{true, false},
	}, {
		name: "hint below the backoff loses",
		hint: "100", jitter: 0.1,
		wantSleeps: []time.Duration{500 * time.Millisecond, time.Second},
		wantHinted: []bool{false, false},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(tr *retry.Transport) { tr.Policy.RetryAfterJitter = tt.jitter },
				retrytest.Step{Status: http.StatusTooManyRequests, Header: jsonHeader("retry-after-ms", tt.hint),
					Body: errorBody("rate_limit_error", "Number of requests has exceeded your rate limit.")},
				retrytest.Step{Status: 529, Header: jsonHeader("x-should-retry", "true"),
					Body: errorBody("overloaded_error", "Overloaded")},
				retrytest.Step{Header: jsonHeader(), Body: messageBody(answer)},
			)
			got, err := h.ask(t)
			if err != nil {
				t.Fatalf("ask: %v", err)
			}
			if got != answer {
				t.Errorf("answer = %q, want %q", got, answer)
			}
			checkSameRequests(t, h.srv, 3)
			if diff := cmp.Diff(tt.wantSleeps, h.ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHinted, h.fromRetryAfter()); diff != "" {
				t.Errorf("Event.FromRetryAfter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorsReachTheSDKAfterOneRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		step        retrytest.Step
		wantStatus  int
		wantType    string
		wantMessage string
	}{{
		name: "400 bad request",
		step: retrytest.Step{Status: http.StatusBadRequest, Header: jsonHeader(),
			Body: errorBody("invalid_request_error", "max_tokens: Field required")},
		wantStatus: http.StatusBadRequest, wantType: "invalid_request_error",
		wantMessage: "max_tokens: Field required",
	}, {
		name: "401 bad key",
		step: retrytest.Step{Status: http.StatusUnauthorized, Header: jsonHeader(),
			Body: errorBody("authentication_error", "invalid x-api-key")},
		wantStatus: http.StatusUnauthorized, wantType: "authentication_error",
		wantMessage: "invalid x-api-key",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The answer after the failure proves a retry would have succeeded.
			h := newHarness(t, nil, tt.step, retrytest.Step{Header: jsonHeader(), Body: messageBody("too late")})
			_, err := h.ask(t)
			apiErr, ok := errors.AsType[*anthropic.Error](err)
			if !ok {
				t.Fatalf("ask error = %v (%T), want an *anthropic.Error", err, err)
			}
			got := []any{apiErr.StatusCode, string(apiErr.Type()), apiErr.Message}
			if diff := cmp.Diff([]any{tt.wantStatus, tt.wantType, tt.wantMessage}, got); diff != "" {
				t.Errorf("status, type, message (-want +got):\n%s", diff)
			}
			checkSameRequests(t, h.srv, 1)
			if s := h.ft.Sleeps(); len(s) != 0 {
				t.Errorf("slept %v, want no sleep", s)
			}
		})
	}
}

func TestReplayable(t *testing.T) {
	t.Parallel()
	never := func(*http.Request) bool { return false }
	tests := []struct {
		name         string
		replayable   func(*http.Request) bool
		wantRequests int
		wantErr      bool
	}{
		{name: "nil: a bare POST is sent once", replayable: nil, wantRequests: 1, wantErr: true},
		{name: "isGeneration: sent again", replayable: isGeneration, wantRequests: 2},
		{name: "a func that says no", replayable: never, wantRequests: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A 529 without x-should-retry: the server may have done the work.
			h := newHarness(t, func(tr *retry.Transport) { tr.Replayable = tt.replayable },
				retrytest.Step{Status: 529, Header: jsonHeader(), Body: errorBody("overloaded_error", "Overloaded")},
				retrytest.Step{Header: jsonHeader(), Body: messageBody("again")},
			)
			_, err := h.ask(t)
			if tt.wantErr {
				apiErr, ok := errors.AsType[*anthropic.Error](err)
				if !ok || apiErr.StatusCode != 529 || apiErr.Type() != "overloaded_error" {
					t.Errorf("ask error = %v, want an *anthropic.Error with status 529, overloaded_error", err)
				}
			} else if err != nil {
				t.Errorf("ask: %v", err)
			}
			checkSameRequests(t, h.srv, tt.wantRequests)
		})
	}
}

func TestIdempotencyKeySameOnEveryAttempt(t *testing.T) {
	t.Parallel()
	// Replayable is nil: the key alone makes the POST safe to send again.
	h := newHarness(t, func(tr *retry.Transport) {
		tr.Replayable = nil
		tr.IdempotencyKey = retry.NewIdempotencyKey
	},
		retrytest.Step{Status: 529, Header: jsonHeader(), Body: errorBody("overloaded_error", "Overloaded")},
		retrytest.Step{Status: http.StatusInternalServerError, Header: jsonHeader(),
			Body: errorBody("api_error", "Internal server error")},
		retrytest.Step{Header: jsonHeader(), Body: messageBody("first")},
	)
	for range 2 {
		if _, err := h.ask(t); err != nil {
			t.Fatalf("ask: %v", err)
		}
	}
	var keys []string
	for _, r := range h.srv.Received() {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	if len(keys) != 4 || keys[0] == "" {
		t.Fatalf("Idempotency-Key of each request = %q, want 4 requests with a key", keys)
	}
	first := keys[0]
	if diff := cmp.Diff([]string{first, first, first}, keys[:3]); diff != "" {
		t.Errorf("keys of the first call's attempts (-want +got):\n%s", diff)
	}
	if keys[3] == first {
		t.Errorf("the second call reused the first call's key %q", first)
	}
}
