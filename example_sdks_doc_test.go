package retry_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// The snippets of docs/sdks.md that need no SDK; interop/ and
// docs/snippets/ hold the others.

// TestDocSDKsClient names its *testing.T tt, since the snippet's Transport
// is t.
func TestDocSDKsClient(tt *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	t := &retry.Transport{
		Policy: retry.Policy{
			MaxAttempts: 5,
			Deadline:    60 * time.Second,
			OnRetry:     retry.LogRetries(slog.Default()),
		},
	}
	httpClient := &http.Client{Transport: t}

	resp, err := httpClient.Get(srv.URL)
	if err != nil {
		tt.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "ok" {
		tt.Errorf("body = %q, %v; want ok", body, err)
	}
}

// TestDocSDKsThrottling runs the Retryable that retries AWS's throttling
// 400s, on fake time, against a server that answers once with the given
// status and body and then 200.
func TestDocSDKsThrottling(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		wantCalls  int32
		wantStatus int
	}{
		{name: "throttling", status: 400, body: `{"__type":"ThrottlingException"}`, wantCalls: 2, wantStatus: 200},
		{name: "S3 request timeout", status: 400, body: "<Error><Code>RequestTimeout</Code></Error>", wantCalls: 2, wantStatus: 200},
		{name: "other 400", status: 400, body: "<Error><Code>InvalidArgument</Code></Error>", wantCalls: 1, wantStatus: 400},
		{name: "503", status: 503, body: "<Error><Code>SlowDown</Code></Error>", wantCalls: 2, wantStatus: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(tc.status)
					io.WriteString(w, tc.body)
				}
			}))
			defer srv.Close()
			ft := retrytest.NewFakeTime()

			tr := &retry.Transport{Policy: retry.Policy{
				Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
				Retryable: func(err error) bool {
					if se, ok := errors.AsType[*retry.StatusError](err); ok && se.StatusCode == http.StatusBadRequest {
						return bytes.Contains(se.Body, []byte("Throttling")) ||
							bytes.Contains(se.Body, []byte("<Code>RequestTimeout</Code>"))
					}
					return retry.IsRetryable(err)
				},
			}}

			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := [2]int{int(calls.Load()), resp.StatusCode}
			if diff := cmp.Diff([2]int{int(tc.wantCalls), tc.wantStatus}, got); diff != "" {
				t.Errorf("[calls, status] (-want +got):\n%s", diff)
			}
		})
	}
}
