package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// harness is the example's OpenAI client, SDK retries off, talking to a
// scripted server, with fake time in the policy so that nothing waits.
type harness struct {
	srv       *retrytest.Server
	ft        *retrytest.FakeTime
	transport *retry.Transport
	client    openai.Client

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
	h.transport = newTransport(p)
	if tweak != nil {
		tweak(h.transport)
	}
	h.client = newClient("sk-test", h.srv.URL+"/v1/", h.transport)
	return h
}

func (h *harness) ask(t *testing.T) (string, error) {
	t.Helper()
	c, err := h.client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	if err != nil {
		return "", err
	}
	return c.Choices[0].Message.Content, nil
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
		if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
			t.Errorf("request %d: %s %s, want POST /v1/chat/completions", i+1, r.Method, r.Path)
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
					Body: errorBody("Rate limit reached.", "requests", "rate_limit_exceeded")},
				retrytest.Step{Status: http.StatusInternalServerError, Header: jsonHeader("x-should-retry", "true"),
					Body: errorBody("The server had an error.", "server_error", "")},
				retrytest.Step{Header: jsonHeader(), Body: completionBody(answer)},
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

// longMessage makes an error body of about 6 KiB.
var longMessage = "This model's maximum context length is 128000 tokens." + strings.Repeat(" Reduce the length.", 300)

func TestErrorsReachTheSDKAfterOneRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		step        retrytest.Step
		wantStatus  int
		wantCode    string
		wantMessage string
	}{{
		name: "400 bad request",
		step: retrytest.Step{Status: http.StatusBadRequest, Header: jsonHeader(),
			Body: errorBody("Unsupported value: 'temperature'.", "invalid_request_error", "unsupported_value")},
		wantStatus: http.StatusBadRequest, wantCode: "unsupported_value",
		wantMessage: "Unsupported value: 'temperature'.",
	}, {
		name: "400 with a body longer than the 4 KiB the Transport peeks at",
		step: retrytest.Step{Status: http.StatusBadRequest, Header: jsonHeader(),
			Body: errorBody(longMessage, "invalid_request_error", "context_length_exceeded")},
		wantStatus: http.StatusBadRequest, wantCode: "context_length_exceeded", wantMessage: longMessage,
	}, {
		name: "429 with the quota used up",
		step: retrytest.Step{Status: http.StatusTooManyRequests, Header: jsonHeader("retry-after-ms", "20"),
			Body: errorBody("You exceeded your current quota, please check your plan and billing details.",
				"insufficient_quota", "insufficient_quota")},
		wantStatus: http.StatusTooManyRequests, wantCode: "insufficient_quota",
		wantMessage: "You exceeded your current quota, please check your plan and billing details.",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The answer after the failure proves a retry would have succeeded.
			h := newHarness(t, nil, tt.step, retrytest.Step{Header: jsonHeader(), Body: completionBody("too late")})
			_, err := h.ask(t)
			apiErr, ok := errors.AsType[*openai.Error](err)
			if !ok {
				t.Fatalf("ask error = %v (%T), want an *openai.Error", err, err)
			}
			got := []any{apiErr.StatusCode, apiErr.Code, apiErr.Message}
			if diff := cmp.Diff([]any{tt.wantStatus, tt.wantCode, tt.wantMessage}, got); diff != "" {
				t.Errorf("status, code, message (-want +got):\n%s", diff)
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
	// Failures after which the server may have done the work.
	failures := []struct {
		name    string
		step    retrytest.Step
		isWant  func(error) bool // the error the SDK returns when it is not retried
		wantErr string
	}{{
		name: "plain 500",
		step: retrytest.Step{Status: http.StatusInternalServerError, Header: jsonHeader(),
			Body: errorBody("The server had an error.", "server_error", "")},
		isWant: func(err error) bool {
			apiErr, ok := errors.AsType[*openai.Error](err)
			return ok && apiErr.StatusCode == http.StatusInternalServerError
		},
		wantErr: "an *openai.Error with status 500",
	}, {
		name:    "attempt timeout",
		step:    retrytest.Step{Hang: true},
		isWant:  func(err error) bool { return errors.Is(err, context.DeadlineExceeded) },
		wantErr: "an error matching context.DeadlineExceeded",
	}}
	never := func(*http.Request) bool { return false }
	tests := []struct {
		name         string
		replayable   func(*http.Request) bool
		wantRequests int
	}{
		{name: "nil: a bare POST is sent once", replayable: nil, wantRequests: 1},
		{name: "isGeneration: sent again", replayable: isGeneration, wantRequests: 2},
		{name: "a func that says no", replayable: never, wantRequests: 1},
	}
	for _, f := range failures {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, func(tr *retry.Transport) {
					tr.Replayable = tt.replayable
					tr.Policy.AttemptTimeout = 100 * time.Millisecond // real time: cuts the hang
				}, f.step, retrytest.Step{Header: jsonHeader(), Body: completionBody("again")})
				_, err := h.ask(t)
				switch {
				case tt.wantRequests == 1 && !f.isWant(err):
					t.Errorf("ask error = %v, want %s", err, f.wantErr)
				case tt.wantRequests > 1 && err != nil:
					t.Errorf("ask: %v", err)
				}
				checkSameRequests(t, h.srv, tt.wantRequests)
			})
		}
	}
}

func TestIdempotencyKeySameOnEveryAttempt(t *testing.T) {
	t.Parallel()
	// Replayable is nil: the key alone makes the POST safe to send again.
	h := newHarness(t, func(tr *retry.Transport) {
		tr.Replayable = nil
		tr.IdempotencyKey = retry.NewIdempotencyKey
	},
		retrytest.Step{Status: http.StatusInternalServerError, Header: jsonHeader(),
			Body: errorBody("The server had an error.", "server_error", "")},
		retrytest.Step{Status: http.StatusServiceUnavailable, Header: jsonHeader(),
			Body: errorBody("Slow down.", "server_error", "")},
		retrytest.Step{Header: jsonHeader(), Body: completionBody("first")},
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

// streamHeader is the header of a streamed chat completion.
func streamHeader() http.Header {
	return http.Header{"Content-Type": {"text/event-stream"}}
}

// chunkEvent is one server-sent event of a streamed chat completion.
func chunkEvent(text string) string {
	return "data: " + mustJSON(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1767225600, "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": nil}},
	}) + "\n\n"
}

// steadyStream sends words one event every 25ms, then the end of the stream.
func steadyStream(words []string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range streamHeader() {
			w.Header()[k] = v
		}
		rc := http.NewResponseController(w)
		for _, word := range words {
			_, _ = io.WriteString(w, chunkEvent(word))
			_ = rc.Flush()
			select {
			case <-time.After(25 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

func TestStreamBodyIdleTimeout(t *testing.T) {
	t.Parallel()
	// Far above the 25ms between events, so that a loaded machine does not
	// fail the steady stream; far below its 600ms in all.
	const idle = 500 * time.Millisecond
	words := strings.Fields(strings.Repeat("slow but steady ", 8)) // 24 words: 600ms
	tests := []struct {
		name     string
		step     retrytest.Step
		wantText string
		wantIdle bool
	}{{
		name:     "stalled stream fails",
		step:     retrytest.Step{Header: streamHeader(), Body: chunkEvent("Hel"), Stall: true},
		wantText: "Hel", wantIdle: true,
	}, {
		name:     "slow but steady stream completes",
		step:     retrytest.Step{Func: steadyStream(words)},
		wantText: strings.Join(words, ""),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(tr *retry.Transport) { tr.BodyIdleTimeout = idle }, tt.step)
			// Without a working idle timeout the stall would last until this.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			stream := h.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
			})
			var text strings.Builder
			for stream.Next() {
				for _, c := range stream.Current().Choices {
					text.WriteString(c.Delta.Content)
				}
			}
			err := stream.Err()
			_ = stream.Close()
			elapsed := time.Since(start)
			if got := text.String(); got != tt.wantText {
				t.Errorf("text = %q, want %q", got, tt.wantText)
			}
			if !tt.wantIdle {
				if err != nil {
					t.Fatalf("stream error after %v: %v", elapsed, err)
				}
				if elapsed <= idle {
					t.Errorf("the stream took %v, not longer than the idle timeout %v: the test proves nothing", elapsed, idle)
				}
				return
			}
			var ne net.Error
			if !errors.Is(err, retry.ErrBodyIdle) || !errors.Is(err, context.DeadlineExceeded) ||
				!errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("stream error = %v (%T), want a timeout matching ErrBodyIdle and context.DeadlineExceeded", err, err)
			}
			if elapsed < idle || elapsed > 5*time.Second {
				t.Errorf("the stalled stream failed after %v, want about %v", elapsed, idle)
			}
		})
	}
}
