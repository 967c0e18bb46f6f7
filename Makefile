# The entry points for checks. `make test` is the newcomer's: the library and
# retrytest only, quick on a fresh machine. `make check` is CI's (see .ci/run):
# `make test`, then every module of its own.
GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
# Modules of their own (examples, bench, and any other directory with a
# go.mod), found anew on every run so a new module is checked without
# editing this file. They hold the third-party dependencies (SDKs, gRPC,
# plotting, peer libraries) that the library's go.mod never gains.
MODULES      = $(sort $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*' -not -path '*/testdata/*')))
FUZZTIME    ?= 30s
BENCH_COUNT ?= 10
BENCH_TIME  ?= 500ms
BENCH_OUT   ?= bench.txt
PEERS_OUT   ?= peers.txt
# Fuzz targets as directory:Target, the directory a package of a module; "."
# is the library.
FUZZ_TARGETS := .:FuzzParseRetryAfter .:FuzzBackoff .:FuzzTransport .:FuzzRateLimitHint \
	.:FuzzReplayBuffer .:FuzzEventStream pace:FuzzParseOpenAI pace:FuzzParseAnthropic pace:FuzzParseGitHub pace:FuzzParseIETF \
	retrygrpc:FuzzPushback internal/sfv:FuzzScanner internal/sfv/sfvdiff:FuzzList \
	internal/sfv/sfvdiff:FuzzDict internal/sfv/sfvdiff:FuzzItem

.PHONY: test check fmt vet staticcheck unit modules bench bench-peers benchstat fuzz cover demo

test: fmt vet staticcheck unit

check: test modules

fmt:
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

unit:
	$(GO) test -race -count=1 ./...

# vet -race type-checks against the same race-built packages the tests
# use, so a module's dependencies (two LLM SDKs among them) compile once,
# not once for vet and again for the tests.
# A module that needs a service brings a script that starts it around a
# command (retryredis/with-redis.sh: a redis-server on a free loopback port;
# retryredis/with-redis-cluster.sh: a Redis Cluster of six nodes); the
# scripts nest, each setting its variable for the command it runs.
modules:
	@set -e; for m in $(MODULES); do \
		echo "== $$m"; \
		run=; if [ -x $$m/with-redis.sh ]; then run=./with-redis.sh; fi; \
		if [ -x $$m/with-redis-cluster.sh ]; then run="$$run ./with-redis-cluster.sh"; fi; \
		(cd $$m && $(GO) vet -race ./... && $$run $(GO) test -race -count=1 ./...); \
	done

demo:
	$(GO) run ./examples/demo

cover:
	$(GO) test -count=1 -coverprofile=cover.out ./...
	$(GO) tool cover -func=cover.out | tail -n 1
	$(GO) tool cover -html=cover.out -o cover.html

# Go 1.26's fuzz coordinator can end a run that found nothing with "context
# deadline exceeded" when -fuzztime expires on a busy machine
# (go.dev/issue/75804, fixed in Go 1.27). A failure counts only when it also
# wrote a failing input to testdata/fuzz/<target>, or is not that message.
fuzz:
	@set -e; log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	for t in $(FUZZ_TARGETS); do \
		d=$${t%%:*}; f=$${t#*:}; \
		echo "== $$d $$f"; \
		before=$$(ls $$d/testdata/fuzz/$$f 2>/dev/null | wc -l); \
		if ! (cd $$d && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) .) > "$$log" 2>&1; then \
			cat "$$log"; \
			after=$$(ls $$d/testdata/fuzz/$$f 2>/dev/null | wc -l); \
			if [ "$$after" != "$$before" ] || ! grep -q '^    context deadline exceeded$$' "$$log"; then \
				exit 1; \
			fi; \
			echo "$$f: no failing input; the run ended on the fuzz coordinator's deadline (go.dev/issue/75804)"; \
		else tail -n 3 "$$log"; fi; \
	done

# Benchmarks: BENCH_COUNT passes of -count 1, so each bare benchmark runs next
# to its retry twin and machine load skews both alike. The raw results are
# benchstat input; bench/cmd/ratio prints retry against bare per benchmark.
# Compare two commits: make bench BENCH_OUT=old.txt, then on the other commit
# make bench BENCH_OUT=new.txt, then make benchstat.
bench:
	$(GO) test -c -o bench.test .
	$(GO) test -c -o pace.test ./pace
	rm -f $(BENCH_OUT)
	for i in $$(seq $(BENCH_COUNT)); do \
		./bench.test -test.run '^$$' -test.bench . -test.benchmem -test.benchtime $(BENCH_TIME) >> $(BENCH_OUT) || exit 1; \
		./pace.test -test.run '^$$' -test.bench . -test.benchmem -test.benchtime $(BENCH_TIME) >> $(BENCH_OUT) || exit 1; \
	done
	rm -f bench.test pace.test
	cat $(BENCH_OUT)
	cd bench && $(GO) run ./cmd/ratio $(abspath $(BENCH_OUT))

# The same scenarios through go-retryablehttp, rehttp and failsafe-go, next
# to ours and bare (the bench/ module, so the library never depends on them).
bench-peers:
	cd bench && $(GO) test -c -o peers.test .
	rm -f $(PEERS_OUT)
	for i in $$(seq $(BENCH_COUNT)); do \
		bench/peers.test -test.run '^$$' -test.bench . -test.benchmem -test.benchtime $(BENCH_TIME) >> $(PEERS_OUT) || exit 1; \
	done
	rm -f bench/peers.test
	cat $(PEERS_OUT)
	cd bench && $(GO) run ./cmd/ratio $(abspath $(PEERS_OUT))

benchstat:
	$(GO) run $(BENCHSTAT) old.txt new.txt
