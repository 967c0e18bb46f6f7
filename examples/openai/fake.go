package main

// A local stand-in for the OpenAI API, so that the example runs without a
// key. It speaks just enough of the chat-completions wire format for the SDK.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
)

// reply is one scripted answer of the fake.
type reply struct {
	status int
	header http.Header
	body   string
}

// demoScript fails twice the way OpenAI does when it is busy, then answers.
// Like OpenAI, it reports its rate limits on each response it rates (here
// 60 requests a minute, all spent), but not on a server error.
func demoScript() []reply {
	return []reply{
		{http.StatusTooManyRequests, jsonHeader(append(rateLimits(60, 0, "1m0s"), "retry-after-ms", "600")...),
			errorBody("Rate limit reached for requests per min (RPM). Please try again in 600ms.",
				"requests", "rate_limit_exceeded")},
		{http.StatusInternalServerError, jsonHeader("x-should-retry", "true"),
			errorBody("The server had an error while processing your request.", "server_error", "")},
		{http.StatusOK, jsonHeader(rateLimits(60, 0, "1m0s")...), completionBody("Hello there, nice to meet!")},
	}
}

// rateLimits returns OpenAI's rate-limit headers for requests (limit a
// minute, remaining, and the time until the bucket is full again) and for
// tokens, of which this fake has plenty.
func rateLimits(limit, remaining int, reset string) []string {
	return []string{
		"x-ratelimit-limit-requests", strconv.Itoa(limit),
		"x-ratelimit-remaining-requests", strconv.Itoa(remaining),
		"x-ratelimit-reset-requests", reset,
		"x-ratelimit-limit-tokens", "150000",
		"x-ratelimit-remaining-tokens", "149984",
		"x-ratelimit-reset-tokens", "6ms",
	}
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
	for _, k := range []string{"Retry-After-Ms", "Retry-After", "X-Should-Retry", "X-Ratelimit-Remaining-Requests"} {
		if v := h.Get(k); v != "" {
			parts = append(parts, strings.ToLower(k)+": "+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

// errorBody is an OpenAI error, as the API sends it with a 4xx or 5xx.
func errorBody(message, typ, code string) string {
	e := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	return mustJSON(map[string]any{"error": e})
}

// completionBody is a chat completion whose answer is text.
func completionBody(text string) string {
	return mustJSON(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1767225600, "model": model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": text, "refusal": nil},
		}},
		"usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only ever called with maps of plain values
	}
	return string(b)
}
