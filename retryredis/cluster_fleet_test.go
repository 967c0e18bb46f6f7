package retryredis

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// TestClusterSharedBudget runs TestFleet's fleet in this process: two
// processes, each with a ClusterClient of its own and a Budget on a
// BudgetStore of one name, whose callers retry as fast as the budget lets
// them. While the cluster serves them, their retries together stay within
// one budget; then each closes its client, the cut: each falls back to its
// own window, and every call still ends within its deadline.
func TestClusterSharedBudget(t *testing.T) {
	checkGoroutines(t)
	admin := newClusterAdmin(t)
	admin.waitHealthy(context.Background())
	if testing.Short() {
		t.Skip("the fleet runs for several seconds")
	}
	name := uniqueName(t)
	start := time.Now().Add(100 * time.Millisecond)
	cut := start.Add(fleetShared)
	stop := cut.Add(fleetAfter)
	results := make([]fleetResult, 2)
	var wg sync.WaitGroup
	for i := range results {
		rdb := newClusterClient(t, admin.addrs)
		wg.Go(func() { results[i] = clusterFleetProcess(t, rdb, name, start, cut, stop) })
	}
	wg.Wait()
	checkFleet(t, results, start, cut)
}

// clusterFleetProcess is one process of TestClusterSharedBudget: what
// TestFleetChild does, on rdb, which it closes at cut.
func clusterFleetProcess(t *testing.T, rdb *redis.ClusterClient, name string, start, cut, stop time.Time) fleetResult {
	// A little before the cut, so that nothing counted as before it ran
	// on local limits.
	isBefore := func(at time.Time) bool { return at.Before(cut.Add(-50 * time.Millisecond)) }
	var r fleetResult
	var fallbacks, retries [2]atomic.Int64 // before and after the cut
	budget := &retry.Budget{
		Ratio: fleetRatio, MinPerSecond: fleetFloor, Window: fleetWindow,
		Store: NewBudgetStore(rdb, name), StoreTimeout: fleetTimeout,
		OnFallback: func(error) {
			if time.Now().Before(cut) {
				fallbacks[0].Add(1)
			} else {
				fallbacks[1].Add(1)
			}
		},
	}
	p := retry.Policy{
		MaxAttempts: 1000, Deadline: fleetDeadline, Base: time.Nanosecond, Cap: time.Nanosecond,
		Budget: budget,
		Sleep:  func(ctx context.Context, _ time.Duration) error { return ctx.Err() }, // as fast as it can
		OnRetry: func(retry.Event) {
			if isBefore(time.Now()) {
				retries[0].Add(1)
			} else {
				retries[1].Add(1)
			}
		},
	}
	fail := func(context.Context) (int, error) { return 0, &retry.StatusError{StatusCode: 503} }

	time.Sleep(time.Until(start))
	r.Started = time.Now()
	var mu sync.Mutex // protects r
	var wg sync.WaitGroup
	for range fleetGoroutines {
		wg.Go(func() {
			var before, after phaseCount
			var maxBefore, maxAfter time.Duration
			var over int64
			for time.Now().Before(stop) {
				began := time.Now()
				_, err := retry.Do(context.Background(), p, fail)
				took := time.Since(began)
				if _, ok := errors.AsType[*retry.Error](err); !ok {
					t.Errorf("a call ended with %v, want a *retry.Error", err)
					return
				}
				if took > fleetLate {
					over++
				}
				if isBefore(began) {
					before.Calls++
					maxBefore = max(maxBefore, took)
				} else if began.After(cut) {
					after.Calls++
					maxAfter = max(maxAfter, took)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			r.Before.Calls += before.Calls
			r.After.Calls += after.Calls
			r.MaxCallBefore = max(r.MaxCallBefore, maxBefore)
			r.MaxCallAfter = max(r.MaxCallAfter, maxAfter)
			r.CallsOverDeadline += over
		})
	}
	time.Sleep(time.Until(cut))
	rdb.Close()
	wg.Wait()
	r.Cut, r.Stopped = cut, time.Now()
	r.Before.Retries, r.After.Retries = retries[0].Load(), retries[1].Load()
	r.FallbacksBefore, r.FallbacksAfter = fallbacks[0].Load(), fallbacks[1].Load()
	return r
}
