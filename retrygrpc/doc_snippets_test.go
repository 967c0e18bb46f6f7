package retrygrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The snippets of docs/grpc.md, run against the test service. The names a
// snippet leaves to the reader (target, creds, client, req) are defined
// around it.

// serveTCP serves script on a loopback TCP port, so that a snippet can dial
// a plain target with grpc.NewClient and options of its own.
func serveTCP(t *testing.T, script func(int) reply) (*server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{script: script, calls: map[string]int{}, left: map[string]time.Duration{}}
	gs := grpc.NewServer()
	gs.RegisterService(&echoDesc, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return s, lis.Addr().String()
}

func TestDocWiring(t *testing.T) {
	srv, target := serveTCP(t, steps())
	creds := insecure.NewCredentials()

	p := retry.Policy{
		MaxAttempts:    4,
		AttemptTimeout: 2 * time.Second,
		Deadline:       10 * time.Second,
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(p)),
		grpc.WithDisableRetry(), // see below
	)

	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := say(testContext(t), conn, "hello")
	if err != nil || got != "hello" {
		t.Fatalf("say = %q, %v; want hello, nil", got, err)
	}
	if n := srv.Calls("hello"); n != 1 {
		t.Errorf("calls = %d, want 1", n)
	}
}

func TestDocRetryAborted(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)

	p.Retryable = func(err error) bool {
		return status.Code(err) == codes.Aborted || retrygrpc.IsRetryable(err) ||
			errors.Is(err, context.DeadlineExceeded)
	}

	srv, conn := startServer(t, steps(reply{code: codes.Aborted, msg: "conflict"}), withRetries(p)...)
	if got, err := say(testContext(t), conn, "hello"); err != nil || got != "hello" {
		t.Fatalf("say = %q, %v; want hello, nil", got, err)
	}
	if n := srv.Calls("hello"); n != 2 {
		t.Errorf("calls = %d, want 2: ABORTED retried once", n)
	}
}

// thingClient stands for generated client code: GetThing is the test
// service's Say.
type thingClient struct{ conn *grpc.ClientConn }

func (c thingClient) GetThing(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	out := new(wrapperspb.StringValue)
	return out, c.conn.Invoke(ctx, sayMethod, req, out)
}

// captureLog sends the standard logger's output to a buffer until the test
// ends, for the snippets that log.
func captureLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	log.SetFlags(0)
	t.Cleanup(func() {
		log.SetOutput(out)
		log.SetFlags(flags)
	})
	return &buf
}

func TestDocStatusCodeAfterGiveUp(t *testing.T) {
	logs := captureLog(t)
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.MaxAttempts = 2
	down := unavailable("maintenance")
	_, conn := startServer(t, steps(down, down), withRetries(p)...)
	client := thingClient{conn}
	ctx := testContext(t)
	req := wrapperspb.String("thing")

	_, err := client.GetThing(ctx, req)
	switch status.Code(err) { // the last attempt's code, even after give-up
	case codes.OK:
	case codes.NotFound:
		// ...
	}
	if e, ok := errors.AsType[*retry.Error](err); ok {
		log.Printf("gave up after %d attempts (%s)", e.Attempts, e.Reason)
	}

	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("status.Code = %v, want Unavailable", got)
	}
	if diff := cmp.Diff("gave up after 2 attempts (max_attempts)\n", logs.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestDocOnRetryLog(t *testing.T) {
	logs := captureLog(t)
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)

	p.OnRetry = func(e retry.Event) {
		log.Printf("attempt %d: %v; retrying in %v (server's hint: %v)",
			e.Attempt, status.Code(e.Err), e.Delay, e.FromRetryAfter)
	}

	_, conn := startServer(t, steps(unavailable("starting")), withRetries(p)...)
	if _, err := say(testContext(t), conn, "hello"); err != nil {
		t.Fatal(err)
	}
	want := "attempt 1: Unavailable; retrying in 100ms (server's hint: false)\n"
	if diff := cmp.Diff(want, logs.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestDocWholeStream(t *testing.T) {
	_, conn := startServer(t, steps(), grpc.WithDisableRetry())
	ctx := testContext(t)

	p := retry.Policy{Retryable: retrygrpc.IsRetryable}
	replies, err := retry.Do(ctx, p, func(ctx context.Context) ([]string, error) {
		return readAll(ctx, conn, "tick")
	})

	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tick", "tick", "tick"}, replies); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}

// callsThroughInterceptor makes one call through the interceptor on p, to a
// server that is unavailable twice before it answers.
func callsThroughInterceptor(p retry.Policy) {
	_, conn, stop := serve(steps(unavailable("starting"), unavailable("starting")),
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(p)),
		grpc.WithDisableRetry(),
	)
	defer stop()
	if _, err := say(context.Background(), conn, "hello"); err != nil {
		fmt.Println(err)
	}
}

func Example_fakeTime() {
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
	callsThroughInterceptor(p) // your calls through retrygrpc.UnaryClientInterceptor(p)

	fmt.Println(ft.Sleeps()) // every delay, exactly: Rand returns 1
	// Output:
	// [500ms 1s]
}
