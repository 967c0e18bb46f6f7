package retryredis

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/pace"
)

// Benchmarks of the PacerStore against the real Redis of RETRY_REDIS_ADDR:
//
//	./with-redis.sh go test -run '^$' -bench 'Pacer' -benchtime 2s .
//
// The key's buckets refill far faster than the benchmark takes from them,
// so that every call does the whole of its work (both dimensions, a write
// and a TTL) without the queue growing.

// plentyReport is a report of both dimensions that never runs out.
func plentyReport(mark pace.Grant) pace.Report {
	return pace.Report{
		Requests: pace.Limit{Limit: 1e6, Remaining: 1e6 - 1, Rate: 1e9, Mark: mark.Requests},
		Tokens:   pace.Limit{Limit: 1e9, Remaining: 1e9 - 1000, Rate: 1e12, Mark: mark.Tokens},
	}
}

// benchPacerStore returns a store on rdb, the real Redis, whose key "k"
// has learned plentyReport.
func benchPacerStore(b *testing.B, rdb *redis.Client) *PacerStore {
	store := NewPacerStore(rdb, uniqueName(b))
	b.Cleanup(func() { rdb.Del(context.Background(), store.Key("k")) })
	if err := store.Learn(context.Background(), "k", plentyReport(pace.Grant{})); err != nil {
		b.Fatal(err)
	}
	return store
}

// BenchmarkPacerStoreReserve is one reservation of a request and its
// tokens, one script call, from one goroutine: what the store adds before
// an attempt.
func BenchmarkPacerStoreReserve(b *testing.B) {
	store := benchPacerStore(b, realRedis(b))
	ctx := context.Background()
	d := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		if _, err := store.Reserve(ctx, "k", 1000, forever); err != nil {
			b.Fatal(err)
		}
		if len(d) < cap(d) {
			d = append(d, time.Since(began))
		}
	}
	reportPercentiles(b, d)
}

// BenchmarkPacerStoreLearn is one report of both dimensions with the
// marks of a reservation, one script call, from one goroutine: what the
// store adds after a response with rate-limit headers.
func BenchmarkPacerStoreLearn(b *testing.B) {
	store := benchPacerStore(b, realRedis(b))
	ctx := context.Background()
	g, err := store.Reserve(ctx, "k", 1000, forever)
	if err != nil {
		b.Fatal(err)
	}
	r := plentyReport(g)
	d := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		if err := store.Learn(ctx, "k", r); err != nil {
			b.Fatal(err)
		}
		if len(d) < cap(d) {
			d = append(d, time.Since(began))
		}
	}
	reportPercentiles(b, d)
}

// BenchmarkPacerStoreHotKey is many calls at once on one key, from
// hotGoroutines goroutines: two reservations for each report of a
// response, the throughput one API key of a fleet allows.
func BenchmarkPacerStoreHotKey(b *testing.B) {
	store := benchPacerStore(b, hotClient(b))
	ctx := context.Background()
	b.SetParallelism(max(1, hotGoroutines/runtime.GOMAXPROCS(0)))
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if i%3 != 2 {
				if _, err := store.Reserve(ctx, "k", 1000, forever); err != nil {
					b.Error(err)
					return
				}
				continue
			}
			if err := store.Learn(ctx, "k", plentyReport(pace.Grant{})); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "ops/s")
}
