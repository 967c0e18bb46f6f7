package retryredis

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// Benchmarks against the real Redis of RETRY_REDIS_ADDR:
//
//	./with-redis.sh go test -run '^$' -bench . -benchmem
//
// They report percentiles of their own next to ns/op, since a store
// call's tail matters more than its mean.

// plenty is a rule that never runs out, so that every settlement does the
// whole of its work and grants what it is asked.
func plenty(want int64) retry.BudgetSettlement {
	return retry.BudgetSettlement{Deposits: 1, Want: want, Ratio: 1, MinPerSecond: 1e12, Window: 10 * time.Second}
}

// reportPercentiles reports the 50th and 99th percentiles of d, in
// microseconds.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(percentile(d, 0.50), "p50-µs")
	b.ReportMetric(percentile(d, 0.99), "p99-µs")
}

// percentile returns the q-th quantile of d, sorted, in microseconds.
func percentile(d []time.Duration, q float64) float64 {
	return float64(d[int(q*float64(len(d)-1))]) / 1e3
}

// hotGoroutines is how many goroutines the hot-key benchmarks run at once:
// 16 per core on 2 cores.
const hotGoroutines = 32

// hotClient returns a client of the real Redis with a connection for each
// of the hot-key benchmarks' goroutines, as a process that makes that many
// calls at once would size its pool: with go-redis's default of ten per
// core, a third of them would queue for a connection rather than for
// Redis.
func hotClient(b *testing.B) *redis.Client {
	b.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: realRedis(b).Options().Addr, ContextTimeoutEnabled: true,
		PoolSize: hotGoroutines})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

// BenchmarkStoreSettle is one store operation, one script call, from one
// goroutine: the latency a settlement adds.
func BenchmarkStoreSettle(b *testing.B) {
	rdb := realRedis(b)
	store := NewBudgetStore(rdb, uniqueName(b))
	b.Cleanup(func() { rdb.Del(context.Background(), store.Key()) })
	ctx := context.Background()
	d := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		began := time.Now()
		if _, err := store.Settle(ctx, plenty(1)); err != nil {
			b.Fatal(err)
		}
		if len(d) < cap(d) {
			d = append(d, time.Since(began))
		}
	}
	reportPercentiles(b, d)
}

// BenchmarkStoreHotKey is many settlements at once on one budget, from
// hotGoroutines goroutines: the throughput one key allows.
func BenchmarkStoreHotKey(b *testing.B) {
	rdb := hotClient(b)
	store := NewBudgetStore(rdb, uniqueName(b))
	b.Cleanup(func() { rdb.Del(context.Background(), store.Key()) })
	ctx := context.Background()
	b.SetParallelism(max(1, hotGoroutines/runtime.GOMAXPROCS(0)))
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := store.Settle(ctx, plenty(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "ops/s")
}

// countingStore counts the settlements a Budget makes (n), and those that
// succeed (ok).
type countingStore struct {
	retry.BudgetStore
	n, ok atomic.Int64
}

func (c *countingStore) Settle(ctx context.Context, s retry.BudgetSettlement) (retry.BudgetLease, error) {
	c.n.Add(1)
	l, err := c.BudgetStore.Settle(ctx, s)
	if err == nil {
		c.ok.Add(1)
	}
	return l, err
}

// BenchmarkBudgetCall is what a call that fails once costs the Budget: a
// first attempt's Deposit and a retry's Withdraw, in memory ("local") and
// through Redis with the default lease ("redis"), which must add little
// at the median and few round trips.
func BenchmarkBudgetCall(b *testing.B) {
	run := func(b *testing.B, bg *retry.Budget, counter *countingStore) {
		d := make([]time.Duration, 0, 1<<20)
		b.ReportAllocs()
		for b.Loop() {
			began := time.Now()
			bg.Deposit()
			if !bg.Withdraw() {
				b.Fatal("a retry was refused")
			}
			if len(d) < cap(d) {
				d = append(d, time.Since(began))
			}
		}
		reportPercentiles(b, d)
		if counter != nil {
			b.ReportMetric(float64(counter.n.Load())/float64(b.N), "roundtrips/op")
		}
	}
	b.Run("local", func(b *testing.B) {
		run(b, &retry.Budget{Ratio: 1, MinPerSecond: 1e12}, nil)
	})
	b.Run("redis", func(b *testing.B) {
		rdb := realRedis(b)
		counter := &countingStore{BudgetStore: NewBudgetStore(rdb, uniqueName(b))}
		b.Cleanup(func() { rdb.Del(context.Background(), counter.BudgetStore.(*BudgetStore).Key()) })
		var fallbacks atomic.Int64
		bg := &retry.Budget{Ratio: 1, MinPerSecond: 1e12, Store: counter,
			OnFallback: func(error) { fallbacks.Add(1) }}
		run(b, bg, counter)
		b.ReportMetric(float64(fallbacks.Load()), "fallbacks")
	})
}
