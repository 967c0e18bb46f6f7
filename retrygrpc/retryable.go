package retrygrpc

import (
	"errors"
	"math"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// pushbackKey is the trailer by which a server tells a client when to try
// again, or not to (gRPC's retry design, A6).
const pushbackKey = "grpc-retry-pushback-ms"

// maxDuration is the longest time.Duration; a hint beyond it saturates.
const maxDuration = time.Duration(math.MaxInt64)

// IsRetryable reports whether err, the error of a gRPC call, may pass on a
// second try. It is what [UnaryClientInterceptor] judges by when
// Policy.Retryable is nil.
//
// For an error that carries a gRPC status (its own GRPCStatus method, or one
// that [errors.As] finds in its chain) it is true for UNAVAILABLE, and for
// RESOURCE_EXHAUSTED unless the status details hold a
// google.rpc.QuotaFailure and no google.rpc.RetryInfo: a quota that is used
// up and that the server gives no time for comes back no sooner on a retry.
// Every other code is final, DEADLINE_EXCEEDED included: a server's
// deadline is not the client's to extend. (The interceptor itself retries an
// attempt cut by its own AttemptTimeout.)
//
// An error without a gRPC status is judged by [retry.IsRetryable].
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	st, ok := grpcStatus(err)
	if !ok {
		return retry.IsRetryable(err)
	}
	switch st.Code() {
	case codes.Unavailable:
		return true
	case codes.ResourceExhausted:
		quota, info := false, false
		for _, d := range st.Details() {
			switch d.(type) {
			case *errdetails.QuotaFailure:
				quota = true
			case *errdetails.RetryInfo:
				info = true
			}
		}
		return !quota || info
	}
	return false
}

// grpcStatus returns the status that err carries, the way status.FromError
// finds it, or false when it carries none.
func grpcStatus(err error) (*status.Status, bool) {
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return nil, false
	}
	st := gs.GRPCStatus()
	return st, st != nil
}

// pushback reads the grpc-retry-pushback-ms trailer. It returns the delay
// the server asks for (0 when it sent none), or stop when the server asks
// the client not to retry: A6 reads a negative, malformed or repeated value
// that way.
func pushback(trailer metadata.MD) (d time.Duration, stop bool) {
	vs := trailer[pushbackKey] // metadata keys are lowercase: no Get, no copy
	switch len(vs) {
	case 0:
		return 0, false
	case 1:
		return parseMillis(vs[0])
	}
	return 0, true
}

// parseMillis reads a non-negative decimal number of milliseconds: digits
// only, no sign, no space, no fraction. Anything else is a request to stop.
// A number too large for a time.Duration saturates instead of overflowing;
// the loop then gives up at once, since no such wait fits a Deadline.
func parseMillis(s string) (d time.Duration, stop bool) {
	if s == "" {
		return 0, true
	}
	const limit = int64(maxDuration / time.Millisecond)
	var ms int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, true
		}
		if ms <= limit { // keep reading the digits, but stop growing
			ms = ms*10 + int64(c-'0')
		}
	}
	if ms > limit {
		return maxDuration, false
	}
	return time.Duration(ms) * time.Millisecond, false
}

// retryInfo returns the delay of a google.rpc.RetryInfo in err's status
// details, if any. A negative or missing delay is no hint; a huge one
// saturates (durationpb.AsDuration does not overflow).
func retryInfo(err error) (time.Duration, bool) {
	st, ok := grpcStatus(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		ri, ok := d.(*errdetails.RetryInfo)
		if !ok || ri.GetRetryDelay() == nil {
			continue
		}
		if v := ri.GetRetryDelay().AsDuration(); v >= 0 {
			return v, true
		}
	}
	return 0, false
}
