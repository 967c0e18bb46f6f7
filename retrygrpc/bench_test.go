package retrygrpc_test

import (
	"context"
	"testing"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
)

// BenchmarkUnary measures what the interceptor adds to a call that succeeds
// at once, over bufconn, against the same call without it, and without it
// but under a deadline: the attempt timeout alone makes grpc send a
// grpc-timeout and both ends run a timer.
func BenchmarkUnary(b *testing.B) {
	for _, bc := range []struct {
		name     string
		opts     []grpc.DialOption
		deadline bool // each call under context.WithTimeout, as each attempt is
	}{
		{name: "bare", opts: []grpc.DialOption{grpc.WithDisableRetry()}},
		{name: "bare_deadline", opts: []grpc.DialOption{grpc.WithDisableRetry()}, deadline: true},
		{name: "retry", opts: withRetries(retry.Policy{})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, conn := startServer(b, steps(), bc.opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := ctx, context.CancelFunc(func() {})
				if bc.deadline {
					ctx, cancel = context.WithTimeout(ctx, retry.DefaultAttemptTimeout)
				}
				_, err := say(ctx, conn, "bench")
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
