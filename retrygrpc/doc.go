// Package retrygrpc retries unary gRPC calls with the policy of
// [github.com/retrykit/retry].
//
// [UnaryClientInterceptor] runs every unary call made through a
// [google.golang.org/grpc.ClientConn] through [retry.Do]:
//
//	p := retry.Policy{MaxAttempts: 4, Deadline: 20 * time.Second}
//	conn, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(creds),
//		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(p)),
//		grpc.WithDisableRetry(), // grpc's own retries would multiply ours
//	)
//
// [IsRetryable] is its default judge of a status: UNAVAILABLE, and
// RESOURCE_EXHAUSTED unless the server says a quota is used up without
// saying when to come back. The server's hint of when to come back, a
// grpc-retry-pushback-ms trailer or a google.rpc.RetryInfo detail, is
// honoured as Retry-After is for HTTP, and a negative pushback stops
// retrying, as gRPC's retry design (A6) says.
//
// Streams are out of scope: a stream that failed halfway cannot be resumed
// by a layer that does not know what its messages mean. Run retry.Do around
// the whole stream instead, with IsRetryable as the Policy's Retryable (see
// the stream example).
//
// The package is a module of its own, so that the retry library itself
// never depends on grpc.
package retrygrpc
