package retrygrpc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func ExampleUnaryClientInterceptor() {
	p := retry.Policy{
		MaxAttempts: 4,
		Base:        time.Millisecond, // short, for the example
		OnRetry: func(e retry.Event) {
			fmt.Printf("attempt %d failed: %v\n", e.Attempt, status.Code(e.Err))
		},
	}
	// serve starts a server over an in-memory connection (bufconn) that
	// is unavailable twice, then answers, and dials it with these options.
	srv, conn, stop := serve(steps(unavailable("starting"), unavailable("starting")),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(p)),
		grpc.WithDisableRetry(), // one retry layer, not two
	)
	defer stop()

	got, err := say(context.Background(), conn, "hello")
	fmt.Println(got, err)
	fmt.Println("calls:", srv.Calls("hello"))
	// Output:
	// attempt 1 failed: Unavailable
	// attempt 2 failed: Unavailable
	// hello <nil>
	// calls: 3
}

func ExampleUnaryClientInterceptor_giveUp() {
	p := retry.Policy{MaxAttempts: 2, Base: time.Millisecond}
	down := unavailable("maintenance")
	_, conn, stop := serve(steps(down, down),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(p)),
		grpc.WithDisableRetry(),
	)
	defer stop()

	_, err := say(context.Background(), conn, "hello")
	if e, ok := errors.AsType[*retry.Error](err); ok {
		fmt.Println("reason:", e.Reason, "attempts:", e.Attempts)
	}
	fmt.Println("code:", status.Code(err)) // the last attempt's
	fmt.Println("message:", status.Convert(errors.Unwrap(err)).Message())
	// Output:
	// reason: max_attempts attempts: 2
	// code: Unavailable
	// message: maintenance
}

func ExampleUnaryClientInterceptor_perMethod() {
	retrying := retrygrpc.UnaryClientInterceptor(retry.Policy{Base: time.Millisecond})
	// Only the methods known to be safe to run twice are retried.
	idempotent := map[string]bool{"/retrygrpc.test.Echo/Say": true}
	onlyIdempotent := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !idempotent[method] {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		return retrying(ctx, method, req, reply, cc, invoker, opts...)
	}
	srv, conn, stop := serve(steps(unavailable("starting")),
		grpc.WithUnaryInterceptor(onlyIdempotent),
		grpc.WithDisableRetry(),
	)
	defer stop()

	got, err := say(context.Background(), conn, "hello")
	fmt.Println(got, err, "calls:", srv.Calls("hello"))
	// Output: hello <nil> calls: 2
}

func ExampleIsRetryable() {
	quota := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{
		{Subject: "project:demo", Description: "daily limit reached"},
	}}
	usedUp, _ := status.New(codes.ResourceExhausted, "quota").WithDetails(quota)
	later, _ := status.New(codes.ResourceExhausted, "quota").WithDetails(quota,
		&errdetails.RetryInfo{RetryDelay: durationpb.New(30 * time.Second)})

	fmt.Println(retrygrpc.IsRetryable(status.Error(codes.Unavailable, "restarting")))
	fmt.Println(retrygrpc.IsRetryable(status.Error(codes.InvalidArgument, "bad name")))
	fmt.Println(retrygrpc.IsRetryable(status.Error(codes.ResourceExhausted, "busy")))
	fmt.Println(retrygrpc.IsRetryable(usedUp.Err()))
	fmt.Println(retrygrpc.IsRetryable(later.Err()))
	fmt.Println(retrygrpc.IsRetryable(context.DeadlineExceeded)) // not gRPC: retry.IsRetryable
	// Output:
	// true
	// false
	// true
	// false
	// true
	// true
}
