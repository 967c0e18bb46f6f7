package retry_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/retrykit/retry"
)

// TestLogOutcomesSaysWhyNotRetried: a POST answered 503 is not sent again
// without a key, and a keyed POST whose body cannot be sent again is not
// either. Each call ends with one line from LogOutcomes that says why,
// with the host, the status and the server's request id, and Outcome.Reason
// says the same; LogRetries writes nothing, since nothing was retried, and
// no line holds the credentials.
func TestLogOutcomesSaysWhyNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		key    bool
		noBody bool // the body has no GetBody
		want   retry.Reason
	}{
		{name: "POST without a key", want: retry.ReasonNotReplayable},
		{name: "keyed POST whose body cannot be sent again", key: true, noBody: true, want: retry.ReasonBodyNotReplayable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("X-Request-Id", "req_0123abc")
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			var reason retry.Reason
			p := retry.Policy{Base: 1, Cap: 1, OnRetry: retry.LogRetries(logger)}
			onDone := retry.LogOutcomes(logger)
			p.OnDone = func(o retry.Outcome) { reason = o.Reason; onDone(o) }
			client := &http.Client{Transport: &retry.Transport{Policy: p}}
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/things?api_key=sk-secret", strings.NewReader(`{"a":1}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer sk-secret")
			if tc.key {
				req.Header.Set("Idempotency-Key", "k1")
			}
			if tc.noBody {
				req.GetBody = nil
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || requests.Load() != 1 {
				t.Fatalf("status %d after %d requests, want the 503 after 1", resp.StatusCode, requests.Load())
			}
			if reason != tc.want {
				t.Errorf("Outcome.Reason = %q, want %q", reason, tc.want)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("logged %d lines, want 1:\n%s", len(lines), logs.String())
			}
			if strings.Contains(logs.String(), "sk-secret") {
				t.Errorf("the log holds the credentials: %s", logs.String())
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
				t.Fatal(err)
			}
			delete(got, "time")
			want := map[string]any{
				"level": "WARN", "msg": "not retried", "reason": string(tc.want), "attempts": float64(1),
				"host": strings.TrimPrefix(srv.URL, "http://"), "status": float64(503), "request_id": "req_0123abc",
				"error": "retry: HTTP 503 Service Unavailable",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the line (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogRetriesHostAndRequestID: each retry's line names the host and the
// server's request id.
func TestLogRetriesHostAndRequestID(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Request-Id", "req_ first") // white space is dropped
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var logs bytes.Buffer
	p := retry.Policy{Base: 1, Cap: 1, OnRetry: retry.LogRetries(slog.New(slog.NewTextHandler(&logs, nil)))}
	resp, err := (&http.Client{Transport: &retry.Transport{Policy: p}}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line := logs.String()
	for _, want := range []string{"host=" + strings.TrimPrefix(srv.URL, "http://"), "request_id=req_first", "status=503"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}
