package retryredis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// floorSkeleton does what every store operation must, and nothing else:
// read the server's clock, read a hash, write a field back, renew the TTL,
// and answer eight numbers. Its round trip is the least any script-based
// store can take on this Redis and this machine.
var floorSkeleton = redis.NewScript(`
local t = redis.call('TIME')
local v = redis.call('HMGET', KEYS[1], 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i')
redis.call('HSET', KEYS[1], 'a', t[2])
redis.call('PEXPIRE', KEYS[1], 60000)
return {1, 2, 3, 4, 5, 6, 7, 8}
`)

// floorEmpty is a script that does nothing: the cost of EVALSHA itself.
var floorEmpty = redis.NewScript(`return 1`)

// BenchmarkStoreFloor puts each store operation next to what it cannot go
// below on the Redis it runs against: a PING, a script that does nothing,
// and floorSkeleton. Each iteration makes one call of each, in turn first,
// so that they see the same load; each reports its median in microseconds.
// The stores' own benchmarks give their tails.
func BenchmarkStoreFloor(b *testing.B) {
	rdb := realRedis(b)
	ctx := context.Background()
	budget := NewBudgetStore(rdb, uniqueName(b))
	pacer := benchPacerStore(b, rdb)
	skeletonKey := pacer.Key("floor")
	b.Cleanup(func() { rdb.Del(context.Background(), budget.Key(), skeletonKey) })
	grant, err := pacer.Reserve(ctx, "k", 1000, forever)
	if err != nil {
		b.Fatal(err)
	}
	report := plentyReport(grant)
	calls := []struct {
		name string
		call func() error
	}{
		{"ping", func() error { return rdb.Ping(ctx).Err() }},
		{"empty-script", func() error { return floorEmpty.Run(ctx, rdb, []string{skeletonKey}).Err() }},
		{"skeleton-script", func() error { return floorSkeleton.Run(ctx, rdb, []string{skeletonKey}).Err() }},
		{"budget-settle", func() error { _, err := budget.Settle(ctx, plenty(1)); return err }},
		{"pacer-reserve", func() error { _, err := pacer.Reserve(ctx, "k", 1000, forever); return err }},
		{"pacer-learn", func() error { return pacer.Learn(ctx, "k", report) }},
	}
	took := make([][]time.Duration, len(calls))
	for i := 0; b.Loop(); i++ {
		for j := range calls {
			k := (i + j) % len(calls)
			began := time.Now()
			if err := calls[k].call(); err != nil {
				b.Fatalf("%s: %v", calls[k].name, err)
			}
			if len(took[k]) < 1<<16 {
				took[k] = append(took[k], time.Since(began))
			}
		}
	}
	for k, c := range calls {
		if d := took[k]; len(d) > 0 {
			slices.Sort(d)
			b.ReportMetric(percentile(d, 0.50), fmt.Sprintf("%s-p50-µs", c.name))
		}
	}
}
