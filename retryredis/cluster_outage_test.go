package retryredis

import (
	"context"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The cluster tests that upset a master while a tenant on it is called: a
// stall, a manual failover, a crash.
const (
	// clusterQuiet is how long both stores must answer with no failure to
	// count as back: longer than the second that a Pacer whose store
	// failed paces on its own before it asks the store again.
	clusterQuiet = 1500 * time.Millisecond

	// clusterBack is how soon after the cluster is ok again the stores
	// must answer again.
	clusterBack = 10 * time.Second
)

// outage is a tenant on one master, called 100 times a second, while a
// test upsets that master.
type outage struct {
	run   *tenantRun
	calls *callCount
	stop  func()
}

// startOutage starts calling a tenant on sh through rdb, and returns once
// both its stores have answered.
func startOutage(t *testing.T, rdb *redis.ClusterClient, sh shard) *outage {
	t.Helper()
	srv := tenantServer(t)
	o := &outage{run: newTenantRun(t, tenantOn(t, rdb, sh))}
	o.calls, o.stop = o.run.drive(srv.URL, 10*time.Millisecond)
	t.Cleanup(o.stop)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, _, ok := o.run.log.back(time.Time{}); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stores did not answer within 5 s: %v", o.run.log.failures(time.Time{}))
		}
	}
	if n := o.run.fallbacks.Load(); n != 0 {
		t.Errorf("%d fallbacks before the master was touched: %v", n, o.run.log.failures(time.Time{}))
	}
	return o
}

// waitBack waits until both stores have answered after from and gone on
// answering, with no failure, for clusterQuiet, and returns when they
// answered again; false if they did not by limit.
func (o *outage) waitBack(from, limit time.Time) (time.Time, bool) {
	for {
		back, _, ok := o.run.log.back(from)
		switch {
		case ok && time.Since(back) >= clusterQuiet:
			return back, true
		case time.Now().After(limit) && !(ok && back.Before(limit)):
			return time.Time{}, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterMasterStalled stalls the master of a tenant's keys with DEBUG
// SLEEP, for longer than the stores' StoreTimeout and shorter than the
// node timeout (past which the cluster would fail it over): every call
// keeps its Deadline, the Budget and the Pacer fall back to their own
// state, and both use their stores again once the master wakes.
func TestClusterMasterStalled(t *testing.T) {
	checkGoroutines(t)
	admin := newClusterAdmin(t)
	ctx := context.Background()
	sh := clusterShards(t, admin)[0]
	o := startOutage(t, newClusterClient(t, admin.addrs), sh)

	const stall = 3 * clusterStoreTimeout
	began := time.Now()
	if err := admin.nodes[sh.master].Do(ctx, "DEBUG", "SLEEP", stall.Seconds()).Err(); err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	woke := time.Now()
	back, ok := o.waitBack(woke, woke.Add(clusterBack))
	o.stop()

	failed, fallbacks := len(o.run.log.failures(began)), o.run.fallbacks.Load()
	t.Logf("master %s slept %v: %d store calls failed, %d fallbacks; the stores answered again %v after it woke; %s",
		sh.master, woke.Sub(began).Round(time.Millisecond), failed, fallbacks, back.Sub(woke).Round(time.Millisecond),
		o.calls)
	if fallbacks == 0 {
		t.Errorf("no fallback while the master slept %v, past the StoreTimeout of %v", stall, clusterStoreTimeout)
	}
	if !ok {
		t.Errorf("the stores did not answer again, for %v without a failure, within %v of the master waking",
			clusterQuiet, clusterBack)
	}
	if role := admin.role(ctx, sh.master); role != "master" {
		t.Errorf("%s is %q after its stall, not a master: the cluster failed it over", sh.master, role)
	}
	o.calls.check(t, "calls")
}

// TestClusterManualFailover fails a tenant's master over to its replica
// with CLUSTER FAILOVER while the tenant is called, then flushes the
// scripts of the new master: no call misses its Deadline, the clients
// follow the slots to the new master, and the stores reload their scripts
// there (EVAL after NOSCRIPT) without a failure.
func TestClusterManualFailover(t *testing.T) {
	checkGoroutines(t)
	admin := newClusterAdmin(t)
	ctx := context.Background()
	sh := clusterShards(t, admin)[0]
	replica := sh.replicas[0]
	rdb := newClusterClient(t, admin.addrs)
	var noscript atomic.Int64 // Unix nanoseconds of the last NOSCRIPT the client saw
	rdb.AddHook(noscriptHook{&noscript})
	o := startOutage(t, rdb, sh)

	began := time.Now()
	if err := admin.nodes[replica].ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER: %v", err)
	}
	done := admin.waitMaster(ctx, replica, admin.addrs)
	if err := admin.nodes[replica].ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	flushed := time.Now()
	back, ok := o.waitBack(done, done.Add(clusterBack))
	o.stop()

	failures := o.run.log.failures(began)
	t.Logf("%s failed over to %s in %v: %d store calls failed, %d fallbacks; the stores answered again %v after; %s",
		sh.master, replica, done.Sub(began).Round(time.Millisecond), len(failures), o.run.fallbacks.Load(),
		max(back.Sub(done), 0).Round(time.Millisecond), o.calls)
	for _, err := range failures {
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			t.Errorf("a store call failed with %v: the script was not reloaded", err)
		}
	}
	if last := time.Unix(0, noscript.Load()); last.Before(flushed) {
		t.Errorf("no NOSCRIPT after SCRIPT FLUSH on the new master: the test did not make the stores reload")
	}
	hashes := []string{budgetScript.Hash(), pacerReserveScript.Hash(), pacerLearnScript.Hash()}
	exist, err := admin.nodes[replica].ScriptExists(ctx, hashes...).Result()
	if err != nil || slices.Contains(exist, false) {
		t.Errorf("SCRIPT EXISTS on the new master: %v, %v; want the three scripts loaded again", exist, err)
	}
	if !ok {
		t.Errorf("the stores did not answer again, for %v without a failure, within %v of the failover",
			clusterQuiet, clusterBack)
	}
	if role := admin.role(ctx, sh.master); role != "slave" {
		t.Errorf("the old master %s is %q after the failover, not a replica", sh.master, role)
	}
	o.calls.check(t, "calls")
}

// noscriptHook records when its client last saw a NOSCRIPT error.
type noscriptHook struct{ last *atomic.Int64 }

func (h noscriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h noscriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			h.last.Store(time.Now().UnixNano())
		}
		return err
	}
}

func (h noscriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestClusterMasterKilled kills a tenant's master with SIGKILL while the
// tenant is called 100 times a second; the cluster promotes its replica
// after the node timeout. Every call keeps its Deadline, the stores fall
// back, and they answer again within clusterBack of the cluster being ok
// again, with a client of the default options. Then the test restarts the
// killed node, which rejoins as a replica.
func TestClusterMasterKilled(t *testing.T) {
	checkGoroutines(t)
	admin := newClusterAdmin(t)
	dir := clusterDir(t)
	ctx := context.Background()
	sh := clusterShards(t, admin)[0]
	replica := sh.replicas[0]
	survivors := slices.DeleteFunc(slices.Clone(admin.addrs), func(a string) bool { return a == sh.master })
	wait := clusterWait(t)
	o := startOutage(t, newClusterClient(t, admin.addrs), sh)

	t.Cleanup(func() {
		admin.restart(dir, sh.master)
		admin.waitHealthy(ctx)
	})
	killed := time.Now()
	admin.kill(ctx, sh.master)
	up := admin.waitMaster(ctx, replica, survivors)
	back, ok := o.waitBack(up, up.Add(wait))
	o.stop()

	fallbacks := o.run.fallbacks.Load()
	returned := "not within " + wait.String()
	if ok {
		returned = max(back.Sub(up), 0).Round(time.Millisecond).String()
	}
	t.Logf("master %s killed: the cluster was ok again %v later, %s its master; the stores answered again %s after that; "+
		"%d store calls failed, %d fallbacks; %s", sh.master, up.Sub(killed).Round(time.Millisecond), replica, returned,
		len(o.run.log.failures(killed)), fallbacks, o.calls)
	if fallbacks == 0 {
		t.Errorf("no fallback while the master was down")
	}
	switch {
	case !ok:
		t.Errorf("the stores did not answer again, for %v without a failure, within %v of the cluster being ok again",
			clusterQuiet, wait)
	case back.Sub(up) > clusterBack:
		t.Errorf("the stores answered again %v after the cluster was ok again; want %v at most", back.Sub(up), clusterBack)
	}
	o.calls.check(t, "calls")
}

// clusterWait is how long TestClusterMasterKilled waits for the stores
// after the cluster is ok again: twice clusterBack, or
// RETRYREDIS_CLUSTER_WAIT (a duration), to watch a client that takes
// longer.
func clusterWait(t *testing.T) time.Duration {
	v := os.Getenv("RETRYREDIS_CLUSTER_WAIT")
	if v == "" {
		return 2 * clusterBack
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("RETRYREDIS_CLUSTER_WAIT=%q: want a positive duration", v)
	}
	return d
}
