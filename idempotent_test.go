package retry_test

import (
	"net/http"
	"testing"

	"github.com/retrykit/retry"
)

func TestIdempotent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		header http.Header
		want   bool
	}{
		{name: "empty method is GET", method: "", want: true},
		{name: "GET", method: http.MethodGet, want: true},
		{name: "HEAD", method: http.MethodHead, want: true},
		{name: "OPTIONS", method: http.MethodOptions, want: true},
		{name: "TRACE", method: http.MethodTrace, want: true},
		{name: "PUT", method: http.MethodPut, want: true},
		{name: "DELETE", method: http.MethodDelete, want: true},
		{name: "bare POST", method: http.MethodPost, want: false},
		{name: "bare PATCH", method: http.MethodPatch, want: false},
		{name: "CONNECT", method: http.MethodConnect, want: false},
		{name: "lower-case get is not GET", method: "get", want: false},
		{name: "POST with Idempotency-Key", method: http.MethodPost,
			header: http.Header{"Idempotency-Key": {"k1"}}, want: true},
		{name: "PATCH with X-Idempotency-Key", method: http.MethodPatch,
			header: http.Header{"X-Idempotency-Key": {"k1"}}, want: true},
		{name: "POST with a nil key value", method: http.MethodPost,
			header: http.Header{"Idempotency-Key": nil}, want: true},
		{name: "POST with another header", method: http.MethodPost,
			header: http.Header{"Authorization": {"Bearer x"}}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := &http.Request{Method: tt.method, Header: tt.header}
			if got := retry.Idempotent(req); got != tt.want {
				t.Errorf("Idempotent(%q, %v) = %v, want %v", tt.method, tt.header, got, tt.want)
			}
		})
	}
}

func TestIdempotentNilRequest(t *testing.T) {
	t.Parallel()
	if retry.Idempotent(nil) {
		t.Error("Idempotent(nil) = true, want false")
	}
}
