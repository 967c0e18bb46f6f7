package retryotel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/retrykit/retry"
)

func TestErrorType(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "nil", err: nil, want: ""},
		{name: "status", err: &retry.StatusError{StatusCode: 429}, want: "429"},
		{name: "status given up", err: &retry.Error{Reason: retry.ReasonMaxAttempts, Err: &retry.StatusError{StatusCode: 502}}, want: "502"},
		{name: "attempt timeout", err: &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, want: "timeout"},
		{name: "caller canceled after a status", err: fmt.Errorf("retry: %w; last error: %w", context.Canceled, &retry.StatusError{StatusCode: 503}), want: "canceled"},
		{name: "dial through url.Error", err: &url.Error{Op: "Get", URL: "http://x", Err: dial}, want: "*net.OpError"},
		{name: "dial given up", err: &retry.Error{Reason: retry.ReasonDeadline, Err: &url.Error{Op: "Get", URL: "http://x", Err: dial}}, want: "*net.OpError"},
		{name: "given up with no attempt", err: &retry.Error{Reason: retry.ReasonDeadline}, want: "*retry.Error"},
		{name: "plain", err: errors.New("boom"), want: "*errors.errorString"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := errorType(tt.err); got != tt.want {
				t.Errorf("errorType(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestMethod(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "empty means GET", in: "", want: "GET"},
		{name: "POST", in: "POST", want: "POST"},
		{name: "QUERY is not in the list", in: "QUERY", want: "_OTHER"},
		{name: "lower case is not a known method", in: "get", want: "_OTHER"},
		{name: "hostile", in: "X-\x00-" + string(make([]byte, 1000)), want: "_OTHER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := method(tt.in); got != tt.want {
				t.Errorf("method(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
