package main

// A local stand-in for the Anthropic API, so that the example runs without
// a key. It speaks just enough of the Messages API wire format for the SDK.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// reply is one scripted answer of the fake.
type reply struct {
	status int
	header http.Header
	body   string
}

// demoScript fails twice the way Anthropic does when it is busy, then
// answers.
func demoScript() []reply {
	return []reply{
		{529, jsonHeader("x-should-retry", "true"), errorBody("overloaded_error", "Overloaded")},
		{http.StatusTooManyRequests, jsonHeader(append(rateLimits(60, 0), "retry-after-ms", "600", "x-should-retry", "true")...),
			errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit.")},
		{http.StatusOK, jsonHeader(rateLimits(60, 0)...), messageBody("Hello there, nice to meet!")},
	}
}

// rateLimits returns Anthropic's rate-limit headers for requests: the limit
// a minute and what remains. The fake adds the reset, the RFC 3339 time at
// which the bucket is full again, when it answers.
func rateLimits(limit, remaining int) []string {
	return []string{
		"anthropic-ratelimit-requests-limit", strconv.Itoa(limit),
		"anthropic-ratelimit-requests-remaining", strconv.Itoa(remaining),
	}
}

// addReset dates the reset of the rate-limit headers in h, if any, from
// now: the bucket refills at its limit a minute.
func addReset(h http.Header, now time.Time) {
	limit, err1 := strconv.Atoi(h.Get("Anthropic-Ratelimit-Requests-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("Anthropic-Ratelimit-Requests-Remaining"))
	if err1 != nil || err2 != nil || limit <= 0 {
		return
	}
	full := time.Duration(limit-remaining) * time.Minute / time.Duration(limit)
	h.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(full).UTC().Format(time.RFC3339))
}

// startFake starts a loopback server that answers the n-th request with
// script[n] (the last reply repeats) and writes a line about each to out.
// Close it when done.
func startFake(out io.Writer, script ...reply) *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		i := n.Add(1)
		rep := script[min(int(i), len(script))-1]
		fmt.Fprintf(out, "fake server: request %d, %s %s: answering %d%s\n",
			i, r.Method, r.URL.Path, rep.status, headerLine(rep.header))
		for k, v := range rep.header {
			w.Header()[k] = v
		}
		w.Header().Set("Request-Id", fmt.Sprintf("req_fake%d", i))
		addReset(w.Header(), time.Now())
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
}

// jsonHeader returns a JSON content type and the given header pairs.
func jsonHeader(pairs ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Set(pairs[i], pairs[i+1])
	}
	return h
}

// headerLine shows the headers that matter for retrying.
func headerLine(h http.Header) string {
	var parts []string
	for _, k := range []string{"Retry-After-Ms", "Retry-After", "X-Should-Retry", "Anthropic-Ratelimit-Requests-Remaining"} {
		if v := h.Get(k); v != "" {
			parts = append(parts, strings.ToLower(k)+": "+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

// errorBody is an Anthropic error, as the API sends it with a 4xx or 5xx.
func errorBody(typ, message string) string {
	return mustJSON(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": message},
		"request_id": "req_fake",
	})
}

// messageBody is a message whose answer is text.
func messageBody(text string) string {
	return mustJSON(map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 12, "output_tokens": 6},
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only ever called with maps of plain values
	}
	return string(b)
}
