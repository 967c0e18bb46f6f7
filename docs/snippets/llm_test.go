package snippets_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// The snippets of docs/llm.md.

func Example_llmClients() {
	policy := retry.Policy{
		MaxAttempts:      5,
		AttemptTimeout:   2 * time.Minute, // a non-streamed answer sends its headers only when it is complete
		Deadline:         5 * time.Minute,
		Retryable:        retry.LLMRetryable, // 429, 5xx, 529 and timeouts; not a used-up quota
		RetryAfterJitter: 0.1,                // everyone rate-limited at once gets the same hint
		OnRetry:          retry.LogRetries(slog.Default()),
	}
	httpClient := &http.Client{Transport: &retry.Transport{
		Policy: policy,
		Stream: &retry.Stream{Event: retry.LLMEvent}, // an error before the first token is retried unseen
		Pacer:  &pace.Pacer{},                        // one per API key: rate limits, and overload (see below)
		Replayable: func(req *http.Request) bool { // generation may be sent twice: see below
			return retry.Idempotent(req) || // GET and the like, as without Replayable
				strings.HasSuffix(req.URL.Path, "/v1/chat/completions") ||
				strings.HasSuffix(req.URL.Path, "/v1/responses") ||
				strings.HasSuffix(req.URL.Path, "/v1/messages") // not an Assistants thread's /messages
		},
	}}

	oai := openai.NewClient( // github.com/openai/openai-go/v3
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	)
	claude := anthropic.NewClient( // github.com/anthropics/anthropic-sdk-go/v2 (its own option package)
		anthropicoption.WithHTTPClient(httpClient),
		anthropicoption.WithMaxRetries(0),
	)

	_, _ = oai, claude
}

func Example_llmStreaming() {
	ctx := context.Background()

	client := &http.Client{Transport: &retry.Transport{
		Policy:          retry.Policy{MaxAttempts: 1},         // Do retries the whole stream; don't multiply layers
		BodyIdleTimeout: 30 * time.Second,                     // a stream silent this long has stalled
		Stream:          &retry.Stream{Event: retry.LLMEvent}, // a cut or an error event is an error, never an end
	}}
	p := retry.Policy{AttemptTimeout: 5 * time.Minute, Retryable: retry.LLMRetryable} // one attempt = the whole stream

	answer, err := retry.Do(ctx, p, func(ctx context.Context) (string, error) { // buffer, then show
		var b strings.Builder
		err := streamAnswer(ctx, client, &b) // nil only after the final event ([DONE])
		return b.String(), err
	})

	p.OnRetry = func(retry.Event) { fmt.Print(" [interrupted; starting over]\n") } // show live
	_, err = retry.Do(ctx, p, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, streamAnswer(ctx, client, os.Stdout)
	})

	_, _ = answer, err
}

// streamAnswer stands for a reader of a streamed answer; examples/stream
// has a real one.
func streamAnswer(ctx context.Context, client *http.Client, w io.Writer) error {
	_, _ = ctx, client
	_, err := io.WriteString(w, "Hello!")
	return err
}

func Example_llmIdempotencyKey() {
	t := &retry.Transport{IdempotencyKey: retry.NewIdempotencyKey}

	_ = t
}

func Example_llmLogging() {
	p := retry.Policy{OnRetry: retry.LogRetries(slog.Default())}

	_ = p
}
