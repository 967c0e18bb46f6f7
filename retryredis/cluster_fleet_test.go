package retryredis

import (
	"context"
	"sync"
	"testing"
	"time"
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
		wg.Go(func() { results[i] = fleetProcess(t, rdb, name, start, cut, stop, func() { rdb.Close() }) })
	}
	wg.Wait()
	checkFleet(t, results, start, cut)
}
