package retryredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The cluster tests run against a Redis Cluster of six nodes that
// with-redis-cluster.sh starts: three masters, each with a replica, and a
// node timeout of one second. Some kill, fail over or stall a master, so
// none calls t.Parallel: go test runs such tests one at a time, before the
// parallel ones. Each waits for a healthy cluster before it begins, and a
// test that kills a node brings it back as a replica, so that the next
// finds the cluster whole.

// clusterHealthy is the longest wait for a healthy cluster, or a failover.
const clusterHealthy = 30 * time.Second

// clusterAddrs returns the nodes of the cluster, from RETRY_REDIS_CLUSTER
// (with-redis-cluster.sh sets it). Without it the test is skipped, unless
// CI is set: then it fails, as redisAddr does.
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	v := os.Getenv("RETRY_REDIS_CLUSTER")
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but RETRY_REDIS_CLUSTER is not: run the tests through ./with-redis-cluster.sh")
		}
		t.Skip("RETRY_REDIS_CLUSTER is not set; run the tests through ./with-redis-cluster.sh for a real Redis Cluster")
	}
	return strings.Split(v, ",")
}

// newClusterClient returns a client of the cluster as the docs advise one:
// the default options, and ContextTimeoutEnabled.
func newClusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// clusterAdmin reaches each node of the cluster on its own, to watch and
// upset it.
type clusterAdmin struct {
	t     testing.TB
	addrs []string
	nodes map[string]*redis.Client // by address
}

func newClusterAdmin(t testing.TB) *clusterAdmin {
	a := &clusterAdmin{t: t, addrs: clusterAddrs(t), nodes: map[string]*redis.Client{}}
	for _, addr := range a.addrs {
		// No retries: a node that is down says so at once. A read timeout
		// longer than any DEBUG SLEEP a test sends.
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 5 * time.Second})
		t.Cleanup(func() { rdb.Close() })
		a.nodes[addr] = rdb
	}
	return a
}

// shard is a master, its replicas and its slots.
type shard struct {
	master   string
	replicas []string
	slots    [][2]int64 // ranges, ends included
}

func (s shard) owns(slot int64) bool {
	for _, r := range s.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// shards returns the cluster's shards that serve slots, as the first node
// that answers sees them: the master and the replicas that are online.
func (a *clusterAdmin) shards(ctx context.Context) ([]shard, error) {
	var err error
	for _, addr := range a.addrs {
		var all []redis.ClusterShard
		if all, err = a.nodes[addr].ClusterShards(ctx).Result(); err != nil {
			continue
		}
		var shards []shard
		for _, cs := range all {
			if len(cs.Slots) == 0 {
				continue
			}
			var s shard
			for _, r := range cs.Slots {
				s.slots = append(s.slots, [2]int64{r.Start, r.End})
			}
			for _, n := range cs.Nodes {
				if n.Health != "online" {
					continue
				}
				switch addr := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)); n.Role {
				case "master":
					s.master = addr
				case "replica":
					s.replicas = append(s.replicas, addr)
				}
			}
			shards = append(shards, s)
		}
		return shards, nil
	}
	return nil, err
}

// info returns the fields of an INFO section of the node at addr; none
// when it does not answer.
func (a *clusterAdmin) info(ctx context.Context, addr, section string) map[string]string {
	out, err := a.nodes[addr].Info(ctx, section).Result()
	if err != nil {
		return nil
	}
	return infoFields(out)
}

// infoFields reads the name:value lines of INFO and CLUSTER INFO.
func infoFields(out string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f
}

// clusterOK reports whether the node at addr says cluster_state:ok.
func (a *clusterAdmin) clusterOK(ctx context.Context, addr string) bool {
	out, err := a.nodes[addr].ClusterInfo(ctx).Result()
	return err == nil && infoFields(out)["cluster_state"] == "ok"
}

// role returns "master" or "slave", as the node at addr says; "" when it
// does not answer.
func (a *clusterAdmin) role(ctx context.Context, addr string) string {
	return a.info(ctx, addr, "replication")["role"]
}

// unhealthy says what keeps the cluster from being whole, or "": every
// node says cluster_state:ok, and each of three masters has a replica in
// sync with it.
func (a *clusterAdmin) unhealthy(ctx context.Context) string {
	for _, addr := range a.addrs {
		if !a.clusterOK(ctx, addr) {
			return addr + " does not say cluster_state:ok"
		}
	}
	shards, err := a.shards(ctx)
	if err != nil {
		return err.Error()
	}
	if len(shards) != 3 {
		return fmt.Sprintf("%d masters", len(shards))
	}
	for _, s := range shards {
		if s.master == "" {
			return fmt.Sprintf("the slots %v have no master online", s.slots)
		}
		if len(s.replicas) == 0 {
			return "master " + s.master + " has no replica"
		}
		for _, r := range s.replicas {
			f := a.info(ctx, r, "replication")
			if f["role"] != "slave" || f["master_link_status"] != "up" || f["master_sync_in_progress"] != "0" {
				return fmt.Sprintf("replica %s of %s is not in sync: %v", r, s.master, f)
			}
		}
	}
	return ""
}

// waitHealthy waits until the cluster is whole, and fails the test if it
// is not within clusterHealthy.
func (a *clusterAdmin) waitHealthy(ctx context.Context) {
	a.t.Helper()
	for deadline := time.Now().Add(clusterHealthy); ; {
		why := a.unhealthy(ctx)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("the cluster is not healthy after %v: %s", clusterHealthy, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitMaster waits until the node at addr is a master and every node of
// others says cluster_state:ok, and returns when it saw that.
func (a *clusterAdmin) waitMaster(ctx context.Context, addr string, others []string) time.Time {
	a.t.Helper()
	for deadline := time.Now().Add(clusterHealthy); ; {
		ok := a.role(ctx, addr) == "master"
		for _, o := range others {
			ok = ok && a.clusterOK(ctx, o)
		}
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s is not a master of a healthy cluster after %v", addr, clusterHealthy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterShards returns the shards of a healthy cluster.
func clusterShards(t *testing.T, admin *clusterAdmin) []shard {
	t.Helper()
	ctx := context.Background()
	admin.waitHealthy(ctx)
	shards, err := admin.shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return shards
}

// kill kills the node at addr with SIGKILL, as a crash would, and waits
// until it no longer answers.
func (a *clusterAdmin) kill(ctx context.Context, addr string) {
	a.t.Helper()
	pid, err := strconv.Atoi(a.info(ctx, addr, "server")["process_id"])
	if err != nil {
		a.t.Fatalf("no process_id from %s: %v", addr, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		a.t.Fatalf("killing %s (pid %d): %v", addr, pid, err)
	}
	for a.nodes[addr].Ping(ctx).Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// restart starts the node at addr again from its configuration, which
// with-redis-cluster.sh wrote into dir: it rejoins the cluster from its
// nodes.conf, and the script stops it at the end by its pid file.
func (a *clusterAdmin) restart(dir, addr string) {
	a.t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-server", filepath.Join(dir, port, "redis.conf"), "--daemonize", "yes").CombinedOutput()
	if err != nil {
		a.t.Errorf("restarting %s: %v\n%s", addr, err, out)
	}
}

// clusterDir returns the directory of the nodes' files, from
// RETRY_REDIS_CLUSTER_DIR; a test that cannot restart the node it kills is
// skipped without it, unless CI is set.
func clusterDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("RETRY_REDIS_CLUSTER_DIR")
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but RETRY_REDIS_CLUSTER_DIR is not: run the tests through ./with-redis-cluster.sh")
		}
		t.Skip("RETRY_REDIS_CLUSTER_DIR is not set: this test restarts the node it kills from its files")
	}
	return dir
}

// checkGoroutines fails t if goroutines that began during it are still
// there a few seconds after it ends, once every cleanup registered after
// this call has run: the clients and servers closed, the store calls
// ended. Call it first.
func checkGoroutines(t *testing.T) {
	before := goroutines()
	t.Cleanup(func() {
		var left []string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			left = left[:0]
			for id, stack := range goroutines() {
				if _, ok := before[id]; !ok {
					left = append(left, stack)
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) > 0 {
			t.Errorf("%d goroutines outlived the test:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
}

// goroutines returns the stack of every goroutine, by its header line's id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	m := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(g, "goroutine "), " "); ok {
			m[id] = g
		}
	}
	return m
}

// TestClusterSpread runs a tenant on each master, one ClusterClient for
// all: each Budget and Pacer reaches its keys on its own master, with no
// fallback, and no CROSSSLOT or MOVED error ever reaches a store's caller.
func TestClusterSpread(t *testing.T) {
	checkGoroutines(t)
	admin := newClusterAdmin(t)
	ctx := context.Background()
	shards := clusterShards(t, admin)
	rdb := newClusterClient(t, admin.addrs)
	srv := tenantServer(t)
	type spread struct {
		sh    shard
		tn    tenant
		run   *tenantRun
		calls *callCount
		stop  func()
	}
	var all []*spread
	for _, sh := range shards {
		s := &spread{sh: sh, tn: tenantOn(t, rdb, sh)}
		s.run = newTenantRun(t, s.tn)
		s.calls, s.stop = s.run.drive(srv.URL, 20*time.Millisecond)
		all = append(all, s)
	}
	time.Sleep(2 * time.Second)
	for _, s := range all {
		s.stop()
	}
	for _, s := range all {
		errs := s.run.log.failures(time.Time{})
		for _, err := range errs {
			if redis.HasErrorPrefix(err, "CROSSSLOT") || redis.HasErrorPrefix(err, "MOVED") {
				t.Errorf("master %s: a store call failed with %v", s.sh.master, err)
			}
		}
		if n := s.run.fallbacks.Load(); n != 0 || len(errs) != 0 {
			t.Errorf("master %s: %d fallbacks, %d store calls failed, the first: %v", s.sh.master, n, len(errs), errs)
		}
		budget, pacer := s.run.log.successes("budget"), s.run.log.successes("pacer")
		if budget == 0 || pacer == 0 {
			t.Errorf("master %s: %d Budget and %d Pacer store calls succeeded; want some of each", s.sh.master, budget, pacer)
		}
		s.calls.check(t, "master "+s.sh.master)
		// On the master itself, with a client of that node alone: a key
		// of another master's slot would answer MOVED.
		for _, key := range s.tn.keys() {
			if n, err := admin.nodes[s.sh.master].Exists(ctx, key).Result(); err != nil || n != 1 {
				t.Errorf("master %s: EXISTS %s: %d, %v; want the key there", s.sh.master, key, n, err)
			}
		}
		t.Logf("master %s (slots %v): %s; %d Budget and %d Pacer store calls", s.sh.master, s.sh.slots,
			s.calls, budget, pacer)
	}
}
