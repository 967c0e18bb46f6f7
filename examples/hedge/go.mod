module github.com/retrykit/retry/examples/hedge

go 1.26

replace github.com/retrykit/retry => ../..

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/google/go-cmp v0.7.0
	github.com/retrykit/retry v0.0.0-00010101000000-000000000000
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
)
