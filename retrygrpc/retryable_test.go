package retrygrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

func statusErr(c codes.Code, details ...protoadapt.MessageV1) error {
	st := status.New(c, "test")
	if len(details) > 0 {
		var err error
		if st, err = st.WithDetails(details...); err != nil {
			panic(err)
		}
	}
	return st.Err()
}

// nilStatus has a GRPCStatus method that returns nil, which status.FromError
// maps to UNKNOWN.
type nilStatus struct{}

func (nilStatus) Error() string              { return "nil status" }
func (nilStatus) GRPCStatus() *status.Status { return nil }

func TestIsRetryable(t *testing.T) {
	final := []codes.Code{
		codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented,
		codes.Aborted, codes.Internal, codes.Unknown, codes.DataLoss, codes.Canceled,
		codes.DeadlineExceeded,
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "unavailable", err: statusErr(codes.Unavailable), want: true},
		{name: "resource exhausted", err: statusErr(codes.ResourceExhausted), want: true},
		{name: "resource exhausted with retry info",
			err: statusErr(codes.ResourceExhausted, retryDelay(time.Second)), want: true},
		{name: "resource exhausted with quota failure",
			err: statusErr(codes.ResourceExhausted, quotaFailure()), want: false},
		{name: "resource exhausted with quota failure and retry info",
			err: statusErr(codes.ResourceExhausted, retryDelay(time.Second), quotaFailure()), want: true},
		{name: "resource exhausted with other details",
			err: statusErr(codes.ResourceExhausted, &errdetails.ErrorInfo{Reason: "x"}), want: true},
		{name: "unavailable with quota failure",
			err: statusErr(codes.Unavailable, quotaFailure()), want: true},
		{name: "wrapped unavailable", err: fmt.Errorf("call: %w", statusErr(codes.Unavailable)), want: true},
		{name: "wrapped invalid argument", err: fmt.Errorf("call: %w", statusErr(codes.InvalidArgument)), want: false},
		{name: "retry.Error wrapping unavailable",
			err: &retry.Error{Reason: retry.ReasonMaxAttempts, Err: statusErr(codes.Unavailable)}, want: true},
		{name: "non-gRPC unexpected EOF", err: io.ErrUnexpectedEOF, want: true},
		{name: "non-gRPC deadline exceeded", err: context.DeadlineExceeded, want: true},
		{name: "non-gRPC canceled", err: context.Canceled, want: false},
		{name: "non-gRPC unknown", err: errors.New("boom"), want: false},
		{name: "retryable HTTP status", err: &retry.StatusError{StatusCode: 503}, want: true},
		{name: "nil GRPCStatus falls back", err: nilStatus{}, want: false},
	}
	for _, c := range final {
		tests = append(tests, struct {
			name string
			err  error
			want bool
		}{name: "final " + c.String(), err: statusErr(c), want: false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retrygrpc.IsRetryable(tt.err); got != tt.want {
				t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestStatusCodeSeesThroughRetryError checks what callers rely on: the code
// of the last attempt survives the give-up wrapper and fmt wrapping.
func TestStatusCodeSeesThroughRetryError(t *testing.T) {
	last := statusErr(codes.Unavailable)
	tests := []struct {
		name string
		err  error
	}{
		{name: "retry.Error", err: &retry.Error{Reason: retry.ReasonDeadline, Attempts: 2, Err: last}},
		{name: "wrapped retry.Error", err: fmt.Errorf("fetch: %w", &retry.Error{Err: last})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.err); got != codes.Unavailable {
				t.Errorf("status.Code = %v, want Unavailable", got)
			}
		})
	}
}
