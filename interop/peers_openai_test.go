package interop_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/retrykit/retry/retrytest"
)

// newOpenAI returns an openai-go client for the server at baseURL, sending
// through c with the given number of retries of its own.
func newOpenAI(c *http.Client, baseURL string, retries int, more ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithAPIKey("sk-test"),
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(c),
		option.WithMaxRetries(retries),
	}, more...)...)
}

// openaiRun is what a caller of openai-go saw of one call.
type openaiRun struct {
	Attempts int           // requests the server received
	Waited   time.Duration // the call's time, in the bubble: its sleeps
	Err      string        // "" on success; see openaiErr
}

// openaiErr names err for a comparison: "" for nil, the status and message
// of an *openai.Error, "context deadline exceeded", or its text.
func openaiErr(err error) string {
	var apiErr *openai.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &apiErr):
		return fmt.Sprintf("%d %s", apiErr.StatusCode, apiErr.Message)
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded.Error()
	}
	return err.Error()
}

// TestPeerOpenAIRetryAfterMinimum plays openai-go's retry-after table: a 503
// with a Retry-After in one form or another, then a 200. openai-go waits
// the hint when it is at most 2 minutes (or WithMaxRetryDelay) and otherwise
// returns the 503 at once; the Transport waits any hint that ends before
// its Deadline (5 minutes in the recipe), and ignores one it cannot read.
func TestPeerOpenAIRetryAfterMinimum(t *testing.T) {
	gaveUp := openaiRun{Attempts: 1, Err: "503 overloaded"}
	retried := func(d time.Duration) openaiRun { return openaiRun{Attempts: 2, Waited: d} }
	tests := []struct {
		name     string
		header   http.Header   // nil: a Retry-After date dateIn from now
		dateIn   time.Duration // for a nil header
		maxDelay time.Duration // openai-go's WithMaxRetryDelay; 0: its default of 2 minutes
		want     openaiRun     // through the Transport
		peer     *openaiRun    // through openai-go's retries, when it differs
		differ   string        // the row of docs/sdks.md that says why
	}{{
		name:   "seconds",
		header: http.Header{"Retry-After": {"30"}},
		want:   retried(30 * time.Second),
	}, {
		name:   "milliseconds take priority",
		header: http.Header{"Retry-After-Ms": {"30000"}, "Retry-After": {"121"}},
		want:   retried(30 * time.Second),
	}, {
		name:   "default boundary",
		header: http.Header{"Retry-After": {"120"}},
		want:   retried(2 * time.Minute),
	}, {
		name:   "over default",
		header: http.Header{"Retry-After": {"120.001"}},
		want:   retried(120*time.Second + time.Millisecond),
		peer:   &gaveUp,
		differ: rowLongHint,
	}, {
		name:   "over default milliseconds",
		header: http.Header{"Retry-After-Ms": {"120001"}},
		want:   retried(120*time.Second + time.Millisecond),
		peer:   &gaveUp,
		differ: rowLongHint,
	}, {
		name:   "explicit retry still bounded",
		header: http.Header{"Retry-After": {"121"}, "X-Should-Retry": {"true"}},
		want:   retried(121 * time.Second),
		peer:   &gaveUp,
		differ: rowLongHint,
	}, {
		name:   "finite duration overflow",
		header: http.Header{"Retry-After": {"1e100"}},
		want:   retried(0), // no hint: the backoff, 0 with Rand 0
		peer:   &gaveUp,
		differ: rowExponent,
	}, {
		name:   "numeric overflow",
		header: http.Header{"Retry-After": {"1e1000"}},
		want:   retried(0),
		peer:   &gaveUp,
		differ: rowExponent,
	}, {
		name:   "millisecond overflow does not fall back",
		header: http.Header{"Retry-After-Ms": {"1e1000"}, "Retry-After": {"0"}},
		want:   retried(0), // Retry-After: 0
		peer:   &gaveUp,
		differ: rowExponent,
	}, {
		name:     "configured boundary",
		header:   http.Header{"Retry-After": {"0.01"}},
		maxDelay: 10 * time.Millisecond,
		want:     retried(10 * time.Millisecond),
	}, {
		name:     "over configured",
		header:   http.Header{"Retry-After": {"0.011"}},
		maxDelay: 10 * time.Millisecond,
		want:     retried(11 * time.Millisecond),
		peer:     &gaveUp,
		differ:   rowLongHint,
	}, {
		name:     "configured above default",
		header:   http.Header{"Retry-After": {"180"}},
		maxDelay: 3 * time.Minute,
		want:     retried(3 * time.Minute),
	}, {
		name:   "explicit no retry",
		header: http.Header{"Retry-After": {"30"}, "X-Should-Retry": {"false"}},
		want:   gaveUp,
	}, {
		name:   "HTTP date",
		dateIn: 30 * time.Second,
		want:   retried(30 * time.Second),
	}, {
		name:   "over default HTTP date",
		dateIn: 121 * time.Second,
		want:   retried(121 * time.Second),
		peer:   &gaveUp,
		differ: rowLongHint,
	}, {
		// Not in openai-go's table: where the Transport gives up at once.
		name:   "past the Deadline",
		header: http.Header{"Retry-After": {"301"}},
		want:   gaveUp,
	}, {
		name:   "huge, in digits",
		header: http.Header{"Retry-After": {"99999999999999999999"}},
		want:   gaveUp,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := retrytest.NewMemoryServer(t)
				play := func() http.Header {
					h := tc.header.Clone()
					if h == nil {
						h = http.Header{"Retry-After": {time.Now().Add(tc.dateIn).UTC().Format(http.TimeFormat)}}
					}
					h.Set("Content-Type", "application/json")
					srv.Script(
						retrytest.Step{Status: http.StatusServiceUnavailable, Header: h,
							Body: `{"error":{"message":"overloaded","type":"server_error"}}`},
						retrytest.Step{Header: http.Header{"Content-Type": {"application/json"}}, Body: `{}`},
					)
					return h
				}
				call := func(client openai.Client, h http.Header) openaiRun {
					t.Helper()
					before := srv.Requests()
					start := time.Now()
					var out map[string]any
					err := client.Get(context.Background(), "models", nil, &out)
					run := openaiRun{Attempts: srv.Requests() - before, Waited: time.Since(start), Err: openaiErr(err)}
					var apiErr *openai.Error
					if errors.As(err, &apiErr) && (apiErr.Response.Header.Get("Retry-After") != h.Get("Retry-After") ||
						apiErr.Response.Header.Get("Retry-After-Ms") != h.Get("Retry-After-Ms")) {
						t.Error("the error's response lost the server's retry headers")
					}
					return run
				}

				// openai-go's own retries, as its table runs them.
				var opts []option.RequestOption
				if tc.maxDelay > 0 {
					opts = append(opts, option.WithMaxRetryDelay(tc.maxDelay))
				}
				peer := call(newOpenAI(srv.Client(), srv.URL+"/v1/", 1, opts...), play())

				// The Transport, with openai-go's retries off.
				tr, rec := llmRecipe(srv.Client().Transport, nil)
				ours := call(newOpenAI(&http.Client{Transport: tr}, srv.URL+"/v1/", 0), play())

				if ours.Attempts == 2 {
					if diff := cmp.Diff([]time.Duration{tc.want.Waited}, rec.all()); diff != "" {
						t.Errorf("OnRetry delays (-want +got):\n%s", diff)
					}
				}
				comparePeer(t, "openai-go's retries", tc.want, tc.peer, tc.differ, peer, ours)
			})
		})
	}
}

// TestPeerOpenAIDeadline plays openai-go's deadline tests: a call, and a
// stream, cut by the caller's context deadline or openai-go's request
// timeout while the server keeps silent, return when the deadline passes
// and not later; and a Retry-After longer than the time left.
func TestPeerOpenAIDeadline(t *testing.T) {
	const deadline = 100 * time.Millisecond
	chat := openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say this is a test")},
		Model:    "gpt-test",
	}
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	tests := []struct {
		name    string
		step    retrytest.Step
		timeout time.Duration // the caller's context deadline; 0: none
		opts    []option.RequestOption
		call    func(ctx context.Context, c openai.Client, opts []option.RequestOption) error
		want    openaiRun
		peer    *openaiRun
		differ  string
	}{{
		name:    "a call the server never answers",
		step:    retrytest.Step{Hang: true},
		timeout: deadline,
		call: func(ctx context.Context, c openai.Client, opts []option.RequestOption) error {
			_, err := c.Chat.Completions.New(ctx, chat, opts...)
			return err
		},
		want: openaiRun{Attempts: 1, Waited: deadline, Err: "context deadline exceeded"},
	}, {
		name:    "a stream that sends nothing after its headers",
		step:    retrytest.Step{Header: sse, Stall: true},
		timeout: deadline,
		call:    readStream(chat),
		want:    openaiRun{Attempts: 1, Waited: deadline, Err: "context deadline exceeded"},
	}, {
		name: "a stream that sends nothing, under a request timeout",
		step: retrytest.Step{Header: sse, Stall: true},
		opts: []option.RequestOption{option.WithRequestTimeout(deadline)},
		call: readStream(chat),
		want: openaiRun{Attempts: 1, Waited: deadline, Err: "context deadline exceeded"},
	}, {
		name: "a Retry-After longer than the time left",
		step: retrytest.Step{Status: http.StatusServiceUnavailable,
			Header: http.Header{"Retry-After": {"30"}, "Content-Type": {"application/json"}},
			Body:   `{"error":{"message":"overloaded","type":"server_error"}}`},
		timeout: 5 * time.Second,
		call: func(ctx context.Context, c openai.Client, opts []option.RequestOption) error {
			var out map[string]any
			return c.Get(ctx, "models", nil, &out, opts...)
		},
		want:   openaiRun{Attempts: 1, Err: "503 overloaded"}, // at once
		peer:   &openaiRun{Attempts: 1, Waited: 5 * time.Second, Err: "context deadline exceeded"},
		differ: rowCallerDeadline,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := retrytest.NewMemoryServer(t, tc.step)
				run := func(client openai.Client) openaiRun {
					t.Helper()
					ctx := context.Background()
					if tc.timeout > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, tc.timeout)
						defer cancel()
					}
					before := srv.Requests()
					start := time.Now()
					err := tc.call(ctx, client, tc.opts)
					return openaiRun{Attempts: srv.Requests() - before, Waited: time.Since(start), Err: openaiErr(err)}
				}
				peer := run(newOpenAI(srv.Client(), srv.URL+"/v1/", 2))
				tr, _ := llmRecipe(srv.Client().Transport, nil)
				ours := run(newOpenAI(&http.Client{Transport: tr}, srv.URL+"/v1/", 0))

				comparePeer(t, "openai-go's retries", tc.want, tc.peer, tc.differ, peer, ours)
			})
		})
	}
}

// readStream returns a call that streams a chat completion for params and
// reads it to the end, returning the stream's error.
func readStream(params openai.ChatCompletionNewParams) func(context.Context, openai.Client, []option.RequestOption) error {
	return func(ctx context.Context, c openai.Client, opts []option.RequestOption) error {
		stream := c.Chat.Completions.NewStreaming(ctx, params, opts...)
		defer stream.Close()
		for stream.Next() {
			_ = stream.Current()
		}
		return stream.Err()
	}
}
