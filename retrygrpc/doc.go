// Package retrygrpc retries unary gRPC calls.
package retrygrpc
