# The one entry point for checks; CI runs `make test` (see .ci/run).
GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
# Example modules with their own go.mod (SDKs, plotting); their tests run in `make test` too.
EXAMPLE_MODULES := $(patsubst %/go.mod,%,$(wildcard examples/*/go.mod))
FUZZTIME    ?= 30s
FUZZ_TARGETS := FuzzParseRetryAfter FuzzBackoff FuzzTransport

.PHONY: test fmt vet staticcheck unit examples bench bench-peers fuzz cover demo

test: fmt vet staticcheck unit examples

fmt:
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

unit:
	$(GO) test -race -count=1 ./...

examples:
	@set -e; for m in $(EXAMPLE_MODULES); do \
		echo "== $$m"; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 ./...); \
	done

demo:
	$(GO) run ./examples/demo

cover:
	$(GO) test -count=1 -coverprofile=cover.out ./...
	$(GO) tool cover -func=cover.out | tail -n 1
	$(GO) tool cover -html=cover.out -o cover.html

fuzz:
	@set -e; for f in $(FUZZ_TARGETS); do \
		echo "== $$f"; \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) . ; \
	done
