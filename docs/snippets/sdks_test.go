package snippets_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/retrykit/retry"
)

// The OpenAI and Anthropic snippet of docs/sdks.md. The test names its
// *testing.T tt, since the snippet's Transport is t.
func TestSDKsLLMClients(tt *testing.T) {
	var mu sync.Mutex
	var seen []string // method and path of every request the server got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	ctx := context.Background()

	t := &retry.Transport{Policy: retry.Policy{
		AttemptTimeout: 2 * time.Minute, // a non-streamed answer sends its headers only when complete
		Deadline:       5 * time.Minute,
		Retryable:      retry.LLMRetryable, // not a 429 that says the quota is used up
	}}
	t.Replayable = func(req *http.Request) bool {
		switch req.URL.Path {
		case "/v1/chat/completions", "/v1/responses", "/v1/messages": // generation may be sent twice
			return true
		}
		return retry.Idempotent(req)
	}
	httpClient := &http.Client{Transport: t}

	oai := openai.NewClient( // github.com/openai/openai-go/v3 and its option package
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	)
	claude := anthropic.NewClient( // github.com/anthropics/anthropic-sdk-go/v2, with its own option package
		anthropicoption.WithHTTPClient(httpClient),
		anthropicoption.WithMaxRetries(0),
	)

	// Both clients reach the server through httpClient.
	var out map[string]any
	if err := oai.Post(ctx, "chat/completions", map[string]any{"model": "m"}, &out,
		option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test")); err != nil {
		tt.Fatal(err)
	}
	if err := claude.Post(ctx, "v1/messages", map[string]any{"model": "m"}, &out,
		anthropicoption.WithBaseURL(srv.URL+"/"), anthropicoption.WithAPIKey("test")); err != nil {
		tt.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"POST /v1/chat/completions", "POST /v1/messages"}, seen); diff != "" {
		tt.Errorf("requests (-want +got):\n%s", diff)
	}

	// Generation may be sent again; another POST, an upload, may not.
	replayable := map[string]bool{}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/v1/files"} {
		req := httptest.NewRequest(http.MethodPost, "https://api.example.com"+path, nil)
		replayable[path] = t.Replayable(req)
	}
	want := map[string]bool{"/v1/chat/completions": true, "/v1/messages": true, "/v1/files": false}
	if diff := cmp.Diff(want, replayable); diff != "" {
		tt.Errorf("Replayable (-want +got):\n%s", diff)
	}
}
