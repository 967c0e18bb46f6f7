module github.com/retrykit/retry/internal/sfv/sfvdiff

go 1.26.0

require (
	github.com/dunglas/httpsfv v1.1.2
	github.com/google/go-cmp v0.7.0
	github.com/retrykit/retry v0.0.0-00010101000000-000000000000
)

replace github.com/retrykit/retry => ../../..
