// Command anthropic calls Anthropic's Messages API through the official Go
// SDK, with retry.Transport underneath doing all the retrying.
//
// With ANTHROPIC_API_KEY set it asks the real API. Without it, it talks to a
// local fake that speaks the same wire format and fails on a script: a 529
// overloaded_error, then a 429 with retry-after-ms, then an answer. A
// pace.Pacer reads the rate-limit headers of the responses, so the second
// call waits for the quota to refill instead of being refused.
//
//	go run .
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// model is the model asked; any Claude model will do.
const model = anthropic.ModelClaudeHaiku5_5

func main() {
	if err := run(); err != nil {
		fmt.Println("failed:", explain(err))
		os.Exit(1)
	}
}

func run() error {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: dropTime, // keep the output short
	}))

	apiKey, baseURL := os.Getenv("ANTHROPIC_API_KEY"), ""
	if apiKey == "" {
		fmt.Println("ANTHROPIC_API_KEY is not set: asking a local fake that fails twice, then answers.")
		fake := startFake(os.Stdout, demoScript()...)
		defer fake.Close()
		apiKey, baseURL = "sk-ant-fake", fake.URL
	}
	t := newTransport(newPolicy(logger))
	t.Pacer = newPacer(logger)
	client := newClient(apiKey, baseURL, t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Two calls: the first learns the rate limits from the responses'
	// headers, and the second waits its turn instead of being refused.
	for range 2 {
		start := time.Now()
		message, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     model,
			MaxTokens: 256,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello in five words."))},
		})
		if err != nil {
			return err
		}
		fmt.Printf("answer after %v: %s\n", time.Since(start).Round(time.Millisecond), text(message))
	}
	return nil
}

// newPacer returns the Pacer for one API key. Every client that spends the
// key's quota must share it: make it once, next to the key.
func newPacer(logger *slog.Logger) *pace.Pacer {
	return &pace.Pacer{
		// Log every pacing wait; in production, the default minimum (zero
		// here means a second) keeps the log to the waits that matter.
		OnWait: pace.LogWaits(logger, time.Millisecond),
	}
}

// newPolicy returns the retry policy for LLM calls.
func newPolicy(logger *slog.Logger) retry.Policy {
	return retry.Policy{
		MaxAttempts: 5,
		// A message that is not streamed sends its response headers only
		// once the whole answer is written: the attempt timeout must cover
		// the slowest answer you expect, or every long answer fails.
		AttemptTimeout: 2 * time.Minute,
		Deadline:       5 * time.Minute,
		// LLMRetryable retries what IsRetryable does: 429, 5xx (Anthropic's
		// 529 Overloaded among them), timeouts and dropped connections.
		Retryable: retry.LLMRetryable,
		// Every client that hit the rate limit at the same moment gets the
		// same retry-after hint; up to 10% more spreads them out.
		RetryAfterJitter: 0.1,
		OnRetry:          retry.LogRetries(logger),
	}
}

// newTransport returns the retry.Transport for LLM calls, with policy p.
func newTransport(p retry.Policy) *retry.Transport {
	t := retry.NewTransport(nil, p)
	// Messages are POSTs, which the Transport re-sends after a 529, a 500 or
	// a timeout only if told it may: the server may have done the work and
	// lost the reply. For text generation a second call only costs tokens,
	// so say it may. Leave other calls (batches, file uploads) to the
	// default rule: a repeat could create a second one.
	t.Replayable = func(req *http.Request) bool { return retry.Idempotent(req) || isGeneration(req) }
	// A streamed answer that fails before its first token (an overloaded
	// or rate-limit error as the first event, after a 200) is retried
	// unseen; one that breaks later ends with an error, never as a whole
	// answer.
	t.Stream = &retry.Stream{Event: retry.LLMEvent}
	return t
}

// newClient returns an Anthropic client whose requests go through t. An
// empty baseURL means the real API.
func newClient(apiKey, baseURL string, t *retry.Transport) anthropic.Client {
	opts := []option.RequestOption{
		option.WithAPIKey(apiKey),
		option.WithHTTPClient(&http.Client{Transport: t}),
		// The Transport retries; the SDK must not. Its 2 retries by default
		// around our 5 attempts would make up to 3 x 5 = 15 calls, and its
		// sleeps would ignore our deadline.
		option.WithMaxRetries(0),
	}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	return anthropic.NewClient(opts...)
}

// isGeneration reports a request that only generates text (or counts its
// tokens), so that sending it twice is harmless.
func isGeneration(req *http.Request) bool {
	return strings.HasSuffix(req.URL.Path, "/v1/messages") ||
		strings.HasSuffix(req.URL.Path, "/v1/messages/count_tokens")
}

// explain tells the two ways a call can fail apart. When retrying stops on
// an HTTP status (or the status is not worth retrying), the SDK gets the
// response and returns its own *anthropic.Error, body included. When it
// stops on a timeout or a dropped connection, the error is a *retry.Error.
func explain(err error) string {
	if apiErr, ok := errors.AsType[*anthropic.Error](err); ok {
		return fmt.Sprintf("the API said %d (%s): %s", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
	}
	if rerr, ok := errors.AsType[*retry.Error](err); ok {
		return fmt.Sprintf("gave up (%s) after %d attempts: %v", rerr.Reason, rerr.Attempts, rerr.Err)
	}
	return err.Error()
}

// text joins the text blocks of m.
func text(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// dropTime removes the time from log lines.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
