package pace_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// TestLLMDocPacer runs the Pacer snippet of docs/llm.md against a server
// that reports OpenAI's rate-limit headers.
func TestLLMDocPacer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ratelimit-limit-requests", "600")
		w.Header().Set("x-ratelimit-remaining-requests", "599")
		w.Header().Set("x-ratelimit-reset-requests", "100ms")
	}))
	defer srv.Close()
	pacer := &pace.Pacer{} // ready to use; set Cost to count tokens too
	client := &http.Client{Transport: &retry.Transport{Pacer: pacer}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
}
