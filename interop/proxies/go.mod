module github.com/retrykit/retry/interop/proxies

go 1.26

replace github.com/retrykit/retry => ../..

require (
	github.com/google/go-cmp v0.7.0
	github.com/retrykit/retry v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require github.com/jonboulle/clockwork v0.5.0 // indirect
