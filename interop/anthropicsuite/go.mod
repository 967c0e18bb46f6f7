module github.com/retrykit/retry/interop/anthropicsuite

go 1.26
