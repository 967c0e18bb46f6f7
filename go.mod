module github.com/retrykit/retry

go 1.26

require (
	github.com/jonboulle/clockwork v0.5.0
	go.uber.org/goleak v1.3.0
)

require github.com/google/go-cmp v0.7.0
