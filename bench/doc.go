// Package bench compares the cost of retry.Transport and retry.Do with
// other Go retry libraries, in the scenarios of the library's own
// benchmarks. It is a module of its own so that the library never depends
// on the libraries it is compared with:
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 10 | go run ./cmd/ratio
//
// Every benchmark runs the same work bare, through retry, and through
// github.com/hashicorp/go-retryablehttp, github.com/PuerkitoBio/rehttp and
// github.com/failsafe-go/failsafe-go/failsafehttp, each set to wait zero
// between attempts and to make at most 5. Besides time and allocations it
// reports unclosed/op, the response bodies the middleware dropped without
// closing (each one holds a connection until the garbage collector finds
// it), and, over loopback, conns/op, the new connections per request.
package bench
