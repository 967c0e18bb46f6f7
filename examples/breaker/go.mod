module github.com/retrykit/retry/examples/breaker

go 1.26

require (
	github.com/retrykit/retry v0.0.0
	github.com/sony/gobreaker/v2 v2.4.0
)

require github.com/jonboulle/clockwork v0.5.0 // indirect

replace github.com/retrykit/retry => ../..
