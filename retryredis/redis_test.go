package retryredis

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// The clients a BudgetStore takes, by the interface it asks for.
var (
	_ redis.Scripter = (*redis.Client)(nil)
	_ redis.Scripter = (*redis.ClusterClient)(nil)
	_ redis.Scripter = (*redis.Ring)(nil)
)

// redisAddr returns the address of the real Redis the integration tests
// use, from RETRY_REDIS_ADDR (with-redis.sh sets it). Without it the test
// is skipped, unless CI is set: then it fails, so that CI cannot pass
// without running them.
func redisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("RETRY_REDIS_ADDR")
	if addr == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but RETRY_REDIS_ADDR is not: run the tests through ./with-redis.sh")
		}
		t.Skip("RETRY_REDIS_ADDR is not set; run the tests through ./with-redis.sh for a real Redis")
	}
	return addr
}

// realRedis returns a client of the real Redis, after a PING.
func realRedis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("no Redis at RETRY_REDIS_ADDR=%s: %v", rdb.Options().Addr, err)
	}
	return rdb
}

// uniqueName names a budget that no other test, nor an earlier run, uses.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

// hourRule is a rule whose window outlasts any test, so that the slices do
// not move under it: 0.5 per first attempt and a floor of 100.
func hourRule(deposits, want int64) retry.BudgetSettlement {
	return retry.BudgetSettlement{Deposits: deposits, Want: want, Ratio: 0.5, MinPerSecond: 100.0 / 3600,
		Window: time.Hour}
}

func TestRedisBudgetStore(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	ctx := context.Background()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": rdb.Options().Addr}})
	t.Cleanup(func() { ring.Close() })
	tests := []struct {
		name   string
		client redis.Scripter
	}{
		{name: "client", client: rdb},
		{name: "ring", client: ring},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewBudgetStore(tt.client, uniqueName(t))
			t.Cleanup(func() { rdb.Del(ctx, store.Key()) })
			steps := []struct {
				settle retry.BudgetSettlement
				want   int64
			}{
				{settle: hourRule(0, 60), want: 60},
				{settle: hourRule(0, 60), want: 40}, // the floor of 100 is spent
				{settle: hourRule(10, 60), want: 5}, // 0.5 per first attempt
				{settle: hourRule(0, 60), want: 0},
			}
			for i, st := range steps {
				got, err := store.Settle(ctx, st.settle)
				if err != nil || got.Retries != st.want {
					t.Fatalf("step %d: %+v, %v; want %d retries", i, got, err, st.want)
				}
			}
			ttl, err := rdb.PTTL(ctx, store.Key()).Result()
			if err != nil || ttl <= time.Hour || ttl > 2*time.Hour {
				t.Errorf("TTL %v, %v; want up to two windows", ttl, err)
			}
		})
	}
}

// TestRedisBadState: a flushed script, a key of another type.
func TestRedisBadState(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	ctx := context.Background()
	store := NewBudgetStore(rdb, uniqueName(t))
	t.Cleanup(func() { rdb.Del(ctx, store.Key()) })
	if _, err := store.Settle(ctx, hourRule(0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Settle(ctx, hourRule(0, 1)); err != nil || got.Retries != 1 {
		t.Errorf("after SCRIPT FLUSH: %+v, %v; want a lease of 1", got, err)
	}
	if err := rdb.Set(ctx, store.Key(), "a string", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Settle(ctx, hourRule(0, 1)); err == nil {
		t.Errorf("a key holding a string: %+v, want an error", got)
	}
	// Through a Budget, the error is a fallback, never a failed retry.
	var fallbacks atomic.Int32
	b := &retry.Budget{Store: store, StoreTimeout: 5 * time.Second, OnFallback: func(error) { fallbacks.Add(1) }}
	if !b.Withdraw() || fallbacks.Load() != 1 {
		t.Errorf("a Budget on a key of another type: want a retry by the local window and one fallback, got %d", fallbacks.Load())
	}
}

// TestRedisConcurrent: many settlements at once on one key grant the
// floor exactly, no more: the script runs whole.
func TestRedisConcurrent(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	ctx := context.Background()
	store := NewBudgetStore(rdb, uniqueName(t))
	t.Cleanup(func() { rdb.Del(ctx, store.Key()) })
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 20 {
				got, err := store.Settle(ctx, hourRule(0, 3))
				if err != nil {
					t.Error(err)
					return
				}
				granted.Add(got.Retries)
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != 100 {
		t.Errorf("%d retries granted by 640 settlements, want the floor of 100 exactly", got)
	}
}
