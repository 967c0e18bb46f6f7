package pace_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// The snippets of docs/pacing.md.

// TestDocPacingRecipe builds the recipe's client and its Key, and sends a
// request of each partition through them, twice. The server reports limits
// far from reached, so nothing waits; what is checked is that the requests
// go through, that Cost is called once a key's token limit is known (from
// the second request of each key on), and which key Key gives each request.
func TestDocPacingRecipe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Limits far from reached, the way OpenAI reports them.
		for dim, n := range map[string]string{"requests": "1000", "tokens": "100000"} {
			w.Header().Set("x-ratelimit-limit-"+dim, n)
			w.Header().Set("x-ratelimit-remaining-"+dim, n)
			w.Header().Set("x-ratelimit-reset-"+dim, "1s")
		}
		fmt.Fprint(w, r.URL.Path)
	}))
	defer srv.Close()
	logger := slog.New(slog.DiscardHandler)
	var costs atomic.Int64 // the tokens estimateTokens returned
	// estimateTokens reads the caller's estimate from a header, since Cost
	// must not read the body.
	estimateTokens := func(r *http.Request) int64 {
		n, _ := strconv.ParseInt(r.Header.Get("X-Estimated-Tokens"), 10, 64)
		costs.Add(n)
		return n
	}

	pacer := &pace.Pacer{
		// Tokens a request will use, counted against a token limit; nil paces requests only.
		Cost: func(r *http.Request) int64 { return estimateTokens(r) },
		// Log waits of a second or more (the default minimum).
		OnWait: pace.LogWaits(logger, 0),
	}
	client := &http.Client{Transport: &retry.Transport{Pacer: pacer}}
	// Hand client to the SDK: option.WithHTTPClient(client) for openai-go and anthropic-sdk-go.

	pacer.Key = func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/search/") {
			return "search"
		}
		return "core"
	}

	var keys []string

	for _, path := range []string{"/search/code", "/repos/a/b", "/search/code", "/repos/a/b"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Estimated-Tokens", "100")
		keys = append(keys, pacer.Key(req))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != path {
			t.Errorf("GET %s: body %q, %v", path, body, err)
		}
	}
	if diff := cmp.Diff([]string{"search", "core", "search", "core"}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(int64(200), costs.Load()); diff != "" {
		t.Errorf("tokens estimated (-want +got):\n%s", diff)
	}
}
