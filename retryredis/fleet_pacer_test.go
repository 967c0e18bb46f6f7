package retryredis

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// The Pacer's fleet: fleetProcesses processes of fleetGoroutines callers
// each on one API key, whose server keeps one token bucket of 600
// requests a minute, nearly empty at first so that pacing matters within
// seconds. Each caller calls, then thinks for a random while: together
// they ask for about twice the quota, so that callers queue.
const (
	quotaLimit   = 600  // requests, the bucket's size
	quotaRate    = 10   // requests per second: 600 a minute
	quotaInitial = 10.0 // requests in the bucket at first
	quotaService = 20 * time.Millisecond

	pacerDemand   = 2 * quotaRate // calls per second the fleet asks for, if it never waited
	pacerDeadline = 4 * time.Second
	pacerShared   = 5 * time.Second // then redis-server is killed; RETRYREDIS_FLEET_SHARED may set it
	pacerAlone    = 3 * time.Second // every process on its own buckets
	pacerTag      = "PACER-FLEET-RESULT "

	// pacerStoreTimeout is the Pacers' StoreTimeout. A deployment keeps
	// the 50 ms default; here four race-instrumented processes and
	// redis-server share two busy cores, where a goroutine can wait for a
	// CPU far longer than 50 ms (store calls over 500 ms were seen at a
	// load of 13), and a fallback while Redis is up fails the test. Once
	// redis-server is dead, calls to it fail at once (the connection is
	// refused), so this bound is rarely reached after.
	pacerStoreTimeout = time.Second

	// pacerMargin is how late a call may end past its bound on a loaded
	// machine: the scheduler, the race detector, the response read after
	// the last check of the Deadline.
	pacerMargin = time.Second
)

// The phases of a run, by the quota server's clock and the children's.
const (
	phaseShared = iota // redis-server up
	phaseAlone         // redis-server killed
	phaseOver          // the run over, calls ending
)

func phaseAt(t, cut, stop time.Time) int {
	switch {
	case t.Before(cut):
		return phaseShared
	case t.Before(stop):
		return phaseAlone
	}
	return phaseOver
}

// pacerResult is what a child process reports, per phase: calls by when
// they began, fallbacks by when they happened.
type pacerResult struct {
	Phases    [2]pacerPhase
	Fallbacks [2]int64
}

type pacerPhase struct {
	Calls, OK int64         // calls, and those answered 200
	Longest   time.Duration // the longest call
	Late      int64         // calls that ended past their bound
}

// add counts a call that took took and succeeded if ok: late if it took
// longer than late.
func (p *pacerPhase) add(took time.Duration, ok bool, late time.Duration) {
	p.Calls++
	p.Longest = max(p.Longest, took)
	if ok {
		p.OK++
	}
	if took > late {
		p.Late++
	}
}

func (p *pacerPhase) merge(o pacerPhase) {
	p.Calls += o.Calls
	p.OK += o.OK
	p.Longest = max(p.Longest, o.Longest)
	p.Late += o.Late
}

// quotaServer admits requests from one token bucket and answers with
// OpenAI's headers, counting what it admits and refuses in each phase.
type quotaServer struct {
	cut, stop time.Time

	mu                sync.Mutex // protects the fields below
	level             float64
	at                time.Time
	admitted, refused [3]int64 // per phase
}

func (q *quotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	q.mu.Lock()
	q.level = math.Min(quotaLimit, q.level+quotaRate*now.Sub(q.at).Seconds())
	q.at = now
	ok := q.level >= 1
	if ok {
		q.level--
		q.admitted[phaseAt(now, q.cut, q.stop)]++
	} else {
		q.refused[phaseAt(now, q.cut, q.stop)]++
	}
	// The whole requests left, and the time until the bucket is full from
	// there: a rate of exactly quotaRate for the client to read.
	left := int64(q.level)
	next := math.Ceil((1 - q.level) / quotaRate) // seconds until one request is left
	q.mu.Unlock()

	h := w.Header()
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(quotaLimit))
	h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(left, 10))
	h.Set("x-ratelimit-reset-requests", (time.Duration(quotaLimit-left) * time.Second / quotaRate).String())
	if !ok {
		h.Set("Retry-After", strconv.Itoa(int(next)))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	time.Sleep(quotaService) // the model at work: requests are in flight a while
	w.WriteHeader(http.StatusOK)
}

// TestFleetPacer runs fleetProcesses copies of this test binary, each with
// a Pacer whose Store is one redis-server of the test's own. While it
// runs, the fleet paces as one: at most 1% of the attempts are refused.
// Then the test kills redis-server: every call still ends within its
// Deadline, and each process falls back to its own buckets.
func TestFleetPacer(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet runs for several seconds")
	}
	addr, kill := startRedisServer(t)
	run := runPacerFleet(t, addr, kill)
	admitted, refused := run.log(t, phaseShared, "with Redis")
	run.log(t, phaseAlone, "redis-server killed")

	// At most 1% refused (with some 60 attempts in the phase, none), and
	// most of the quota used: a fleet that sent nothing would be refused
	// nothing.
	if refused*100 > admitted+refused {
		t.Errorf("with Redis: %d of %d attempts refused, over 1%%", refused, admitted+refused)
	}
	if quota := run.quota(phaseShared); float64(admitted) < 0.6*quota {
		t.Errorf("with Redis: %d requests admitted, under 60%% of the %.0f the quota allowed", admitted, quota)
	}
	for i, r := range run.results {
		shared, alone := r.Phases[phaseShared], r.Phases[phaseAlone]
		if r.Fallbacks[phaseShared] != 0 {
			t.Errorf("child %d fell back %d times while Redis was up", i, r.Fallbacks[phaseShared])
		}
		if shared.Late+alone.Late != 0 {
			t.Errorf("child %d: %d calls ended past their Deadline with Redis, %d without; the longest took %v and %v",
				i, shared.Late, alone.Late, shared.Longest, alone.Longest)
		}
		// Without Redis the processes no longer coordinate, so refusals
		// are expected; what matters is that each falls back and that its
		// calls go on succeeding.
		if r.Fallbacks[phaseAlone] == 0 {
			t.Errorf("child %d never fell back after redis-server was killed", i)
		}
		if alone.OK == 0 {
			t.Errorf("child %d: none of its %d calls succeeded after redis-server was killed", i, alone.Calls)
		}
	}
}

// TestFleetPacerUncoordinated measures the same fleet with no Store, each
// process pacing alone from the headers it sees, for the figures the docs
// compare with. It runs only with RETRYREDIS_FLEET_UNCOORDINATED set.
func TestFleetPacerUncoordinated(t *testing.T) {
	if os.Getenv("RETRYREDIS_FLEET_UNCOORDINATED") == "" {
		t.Skip("set RETRYREDIS_FLEET_UNCOORDINATED=1 to measure the fleet without a Store")
	}
	run := runPacerFleet(t, "", nil)
	admitted, refused := run.log(t, phaseShared, "uncoordinated")
	a, r := run.log(t, phaseAlone, "uncoordinated, later")
	admitted, refused = admitted+a, refused+r
	t.Logf("uncoordinated in all: %d of %d attempts refused (%.1f%%)", refused, admitted+refused,
		100*float64(refused)/float64(max(admitted+refused, 1)))
	for i, r := range run.results {
		if late := r.Phases[phaseShared].Late + r.Phases[phaseAlone].Late; late != 0 {
			t.Errorf("child %d: %d calls ended past their Deadline", i, late)
		}
	}
	if refused == 0 {
		t.Errorf("no attempt refused: the fleet did not press on its quota")
	}
}

// pacerRun is a run of the fleet: its server, and its children's results.
type pacerRun struct {
	q       *quotaServer
	shared  time.Duration
	results []pacerResult
}

// quota is what the server could admit in a phase.
func (run *pacerRun) quota(phase int) float64 {
	if phase == phaseShared {
		return quotaInitial + quotaRate*run.shared.Seconds()
	}
	return quotaRate * pacerAlone.Seconds()
}

// log logs a phase, summed over the children, and returns what the server
// admitted and refused in it.
func (run *pacerRun) log(t *testing.T, phase int, name string) (admitted, refused int64) {
	t.Helper()
	var sum pacerPhase
	var fallbacks []int64
	for _, r := range run.results {
		sum.merge(r.Phases[phase])
		fallbacks = append(fallbacks, r.Fallbacks[phase])
	}
	run.q.mu.Lock()
	admitted, refused = run.q.admitted[phase], run.q.refused[phase]
	run.q.mu.Unlock()
	d := pacerAlone
	if phase == phaseShared {
		d = run.shared
	}
	t.Logf("%s, %.0f s: %d attempts, %d refused (%.1f%%), %d admitted (%.0f%% of the quota); "+
		"%d calls, %d succeeded; the longest %v; fallbacks per process %v",
		name, d.Seconds(), admitted+refused, refused, 100*float64(refused)/float64(max(admitted+refused, 1)), admitted,
		100*float64(admitted)/run.quota(phase), sum.Calls, sum.OK, sum.Longest.Round(time.Millisecond), fallbacks)
	return admitted, refused
}

// runPacerFleet runs the quota server and the children, which share the
// redis-server at addr (none when empty); kill, when set, kills it at the
// end of the shared phase. That phase lasts pacerShared, or
// RETRYREDIS_FLEET_SHARED (a duration) to watch the shared queue for longer
// than CI affords.
func runPacerFleet(t *testing.T, addr string, kill func()) *pacerRun {
	t.Helper()
	run := &pacerRun{shared: pacerShared}
	if v := os.Getenv("RETRYREDIS_FLEET_SHARED"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("RETRYREDIS_FLEET_SHARED=%q: want a positive duration", v)
		}
		run.shared = d
	}
	start := time.Now().Add(500 * time.Millisecond) // time for the children to start
	cut := start.Add(run.shared)
	stop := cut.Add(pacerAlone)
	run.q = &quotaServer{cut: cut, stop: stop, level: quotaInitial, at: start}
	srv := httptest.NewServer(run.q)
	defer srv.Close()

	ctx, cancel := context.WithDeadline(context.Background(), stop.Add(time.Minute)) // a stuck child is killed
	defer cancel()
	name := uniqueName(t)
	run.results = runChildren[pacerResult](t, ctx, "TestFleetPacerChild", pacerTag, []string{
		"RETRYREDIS_PACER_CHILD=1", "RETRYREDIS_PACER_URL=" + srv.URL, "RETRYREDIS_PACER_REDIS=" + addr,
		"RETRYREDIS_PACER_NAME=" + name, "RETRYREDIS_PACER_TIMES=" + fleetTimes(start, cut, stop)}, cut, kill)
	return run
}

// TestFleetPacerChild is one process of TestFleetPacer; it runs only as
// its child.
func TestFleetPacerChild(t *testing.T) {
	if os.Getenv("RETRYREDIS_PACER_CHILD") == "" {
		t.Skip("a child of TestFleetPacer")
	}
	start, cut, stop := childTimes(t, "RETRYREDIS_PACER_TIMES")
	var fallbacks [2]atomic.Int64 // by phase
	client, closeClient := pacerClient(func(error) { fallbacks[min(phaseAt(time.Now(), cut, stop), phaseAlone)].Add(1) })
	defer closeClient()

	var r pacerResult
	var mu sync.Mutex // protects r
	var wg sync.WaitGroup
	for g := range fleetGoroutines {
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(g)))
		wg.Go(func() {
			phases := pacerCaller(t, client, rng, start, cut, stop)
			mu.Lock()
			defer mu.Unlock()
			for i := range phases {
				r.Phases[i].merge(phases[i])
			}
		})
	}
	wg.Wait()
	r.Fallbacks = [2]int64{fallbacks[0].Load(), fallbacks[1].Load()}
	writeChildResult(t, pacerTag, r)
}

// pacerClient returns the client of a child: a retry.Transport with a
// Deadline per call, whose Pacer reserves from the Redis the parent named,
// if any, and reports each fallback to onFallback.
func pacerClient(onFallback func(error)) (*http.Client, func()) {
	pacer := &pace.Pacer{OnFallback: onFallback}
	var rdb *redis.Client
	if addr := os.Getenv("RETRYREDIS_PACER_REDIS"); addr != "" {
		// No retries in the client, one dial: once redis-server is dead
		// a store call fails at once instead of spending its timeout.
		rdb = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialerRetries: 1})
		pacer.Store = NewPacerStore(rdb, os.Getenv("RETRYREDIS_PACER_NAME"))
		pacer.StoreTimeout = pacerStoreTimeout
	}
	base := &http.Transport{MaxIdleConnsPerHost: fleetGoroutines}
	client := &http.Client{Transport: &retry.Transport{Base: base, Policy: retry.Policy{Deadline: pacerDeadline},
		Pacer: pacer}}
	return client, func() {
		base.CloseIdleConnections()
		if rdb != nil {
			rdb.Close()
		}
	}
}

// pacerCaller is one caller of a child: it calls, thinks, and calls
// again until stop, and reports its calls per phase. Thinking times are
// drawn from an exponential law, the first one included, so that the
// fleet's calls arrive as a Poisson stream of pacerDemand a second while
// no caller waits.
func pacerCaller(t *testing.T, client *http.Client, rng *rand.Rand, start, cut, stop time.Time) [2]pacerPhase {
	mean := float64(fleetProcesses*fleetGoroutines) / pacerDemand * float64(time.Second)
	think := func() time.Duration { return time.Duration(rng.ExpFloat64() * mean) }
	var phases [2]pacerPhase
	for began := start.Add(think()); began.Before(stop); began = time.Now().Add(think()) {
		time.Sleep(time.Until(began))
		began = time.Now()
		ok := pacerCall(t, client, os.Getenv("RETRYREDIS_PACER_URL"))
		ended := time.Now()
		late := pacerDeadline + pacerMargin
		if !ended.Before(cut) {
			late += pacerStoreTimeout // one store call may begin just before the Deadline
		}
		phases[min(phaseAt(began, cut, stop), phaseAlone)].add(ended.Sub(began), ok, late)
	}
	return phases
}

// pacerCall makes one call on the fleet's key and reports whether it
// succeeded. A call that fails must fail as the library promises: with a
// *retry.Error, or a response the retries could not better.
func pacerCall(t *testing.T, client *http.Client, url string) bool {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return false
	}
	req.Header.Set("Authorization", "Bearer fleet-key")
	resp, err := client.Do(req)
	if err != nil {
		if _, ok := errors.AsType[*retry.Error](err); !ok {
			t.Errorf("a call ended with %v, want a *retry.Error", err)
		}
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startRedisServer runs a redis-server of the test's own on a free
// loopback port, with no persistence, and returns its address and a
// function that kills it with SIGKILL, as a crash would; the test's
// cleanup kills it in any case. Without redis-server the test is skipped,
// unless CI is set: then it fails.
func startRedisServer(t *testing.T) (string, func()) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but redis-server is not installed: %v", err)
		}
		t.Skipf("no redis-server (apt-get install redis-server): %v", err)
	}
	var out bytes.Buffer
	// A port just freed may be taken again before redis-server binds it:
	// then it exits, and another port is tried.
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, port, _ := net.SplitHostPort(addr)
		out.Reset()
		cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir())
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		kill := func() { cmd.Process.Kill(); <-exited }
		if redisAnswers(addr, exited) {
			t.Cleanup(kill)
			return addr, kill
		}
		kill()
	}
	t.Fatalf("redis-server did not start; its output:\n%s", &out)
	return "", nil
}

// redisAnswers reports whether the Redis at addr answers a PING within five
// seconds, giving up early if it exits.
func redisAnswers(addr string, exited <-chan struct{}) bool {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if rdb.Ping(context.Background()).Err() == nil {
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}
