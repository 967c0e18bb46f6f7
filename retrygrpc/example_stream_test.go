package retrygrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// countDesc describes the test service's server-streaming method, as
// generated code would.
var countDesc = grpc.StreamDesc{StreamName: "Count", ServerStreams: true}

// readAll opens a Count stream, sends one request and reads every reply. An
// error anywhere fails the whole attempt, and what was read is dropped.
func readAll(ctx context.Context, conn *grpc.ClientConn, text string) ([]string, error) {
	stream, err := conn.NewStream(ctx, &countDesc, "/retrygrpc.test.Echo/Count")
	if err != nil {
		return nil, err
	}
	// SendMsg reports a broken stream as io.EOF; RecvMsg then gives the
	// status.
	if err := stream.SendMsg(wrapperspb.String(text)); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	var got []string
	for {
		m := new(wrapperspb.StringValue)
		switch err := stream.RecvMsg(m); {
		case errors.Is(err, io.EOF):
			return got, nil
		case err != nil:
			return nil, err
		}
		got = append(got, m.GetValue())
	}
}

// Streams are not the interceptor's: run retry.Do around the whole stream,
// from opening it to its end, so that a stream that breaks halfway starts
// over. AttemptTimeout then bounds the whole stream.
func Example_stream() {
	_, conn, stop := serve(steps(unavailable("restarting")), grpc.WithDisableRetry())
	defer stop()

	p := retry.Policy{
		Base:      time.Millisecond,
		Retryable: retrygrpc.IsRetryable, // judge gRPC statuses
		OnRetry: func(e retry.Event) {
			fmt.Printf("attempt %d failed: %v\n", e.Attempt, status.Code(e.Err))
		},
	}
	got, err := retry.Do(context.Background(), p, func(ctx context.Context) ([]string, error) {
		return readAll(ctx, conn, "tick")
	})
	fmt.Println(got, err)
	// Output:
	// attempt 1 failed: Unavailable
	// [tick tick tick] <nil>
}
