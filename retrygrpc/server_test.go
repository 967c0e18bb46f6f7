package retrygrpc_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sayMethod is the one unary method of the test service: it echoes a
// StringValue, or fails the way its script says.
const sayMethod = "/retrygrpc.test.Echo/Say"

// reply is how the server answers one call.
type reply struct {
	code     codes.Code             // OK answers with the request's text
	msg      string                 // the status message
	details  []protoadapt.MessageV1 // status details, such as errdetails.RetryInfo
	header   metadata.MD            // sent as the response header
	trailer  metadata.MD            // sent as the trailer (grpc-retry-pushback-ms goes here)
	hang     bool                   // wait until the call's context is done
	pushback []string               // grpc-retry-pushback-ms values, added to the trailer
}

// server answers each call from a script, counting the calls of each
// request text separately so that concurrent tests do not share a count.
type server struct {
	script func(n int) reply // n counts the calls with the same text, from 1

	mu    sync.Mutex               // protects the fields below
	calls map[string]int           // calls per request text
	left  map[string]time.Duration // time left before the last call's deadline; absent: none
}

// steps is a script that plays the replies in order and then answers OK.
func steps(rs ...reply) func(int) reply {
	return func(n int) reply {
		if n <= len(rs) {
			return rs[n-1]
		}
		return reply{}
	}
}

// Calls returns how many calls with text s the server received.
func (s *server) Calls(text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[text]
}

// Left returns the time that was left before the deadline of the last call
// with text s, as the server saw it, and false if that call had none.
func (s *server) Left(text string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.left[text]
	return d, ok
}

func (s *server) say(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s.mu.Lock()
	s.calls[in.GetValue()]++
	n := s.calls[in.GetValue()]
	if d, ok := ctx.Deadline(); ok {
		s.left[in.GetValue()] = time.Until(d)
	}
	s.mu.Unlock()
	r := s.script(n)
	if r.header != nil {
		if err := grpc.SetHeader(ctx, r.header); err != nil {
			return nil, err
		}
	}
	tr := r.trailer.Copy()
	if len(r.pushback) > 0 {
		if tr == nil {
			tr = metadata.MD{}
		}
		tr["grpc-retry-pushback-ms"] = r.pushback
	}
	if tr != nil {
		if err := grpc.SetTrailer(ctx, tr); err != nil {
			return nil, err
		}
	}
	if r.hang {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if r.code == codes.OK {
		return wrapperspb.String(in.GetValue()), nil
	}
	st := status.New(r.code, r.msg)
	if len(r.details) > 0 {
		var err error
		if st, err = st.WithDetails(r.details...); err != nil {
			return nil, err
		}
	}
	return nil, st.Err()
}

// echoDesc describes the test service by hand, so that no generated code is
// needed: Say is unary, Count streams the request's text back n times.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "retrygrpc.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Say",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(*server).say(ctx, in)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Count",
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(*server).count(stream)
		},
	}},
}

// startServer serves script over an in-memory connection and returns a
// client connection to it that uses opts. Both are closed when the test
// ends.
func startServer(tb testing.TB, script func(int) reply, opts ...grpc.DialOption) (*server, *grpc.ClientConn) {
	tb.Helper()
	s, conn, stop := serve(script, opts...)
	tb.Cleanup(stop)
	return s, conn
}

// serve is startServer for examples, which have no testing.TB: it returns
// a function that stops everything it started.
func serve(script func(int) reply, opts ...grpc.DialOption) (*server, *grpc.ClientConn, func()) {
	lis := bufconn.Listen(1 << 20)
	s := &server{script: script, calls: map[string]int{}, left: map[string]time.Duration{}}
	gs := grpc.NewServer()
	gs.RegisterService(&echoDesc, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///bufnet", opts...)
	if err != nil {
		panic(err) // only for bad options, which the tests do not pass
	}
	return s, conn, func() {
		conn.Close()
		gs.Stop()
		<-served
	}
}

// say calls Say with text through conn.
func say(ctx context.Context, conn *grpc.ClientConn, text string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, sayMethod, wrapperspb.String(text), out, opts...)
	return out.GetValue(), err
}

// testContext returns a context that a stuck test cannot outlive by much.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// count serves the Count stream: it sends the request's text three times,
// or, when the script says to fail, once and then the failure, as a server
// that goes away mid-stream does. It counts its calls apart from Say's, under
// "stream:" and the text.
func (s *server) count(stream grpc.ServerStream) error {
	in := new(wrapperspb.StringValue)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	key := "stream:" + in.GetValue()
	s.mu.Lock()
	s.calls[key]++
	n := s.calls[key]
	s.mu.Unlock()
	r := s.script(n)
	sends := 3
	if r.code != codes.OK {
		sends = 1
	}
	for range sends {
		if err := stream.SendMsg(in); err != nil {
			return err
		}
	}
	if r.code != codes.OK {
		return status.Error(r.code, r.msg)
	}
	return nil
}
