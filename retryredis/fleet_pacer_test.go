package retryredis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
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
	// redis-server share two busy cores, where a goroutine can wait more
	// than 50 ms for a CPU, and a fallback while Redis is up fails the
	// test. Once redis-server is dead, calls to it fail at once (the
	// connection is refused), so this bound is rarely reached after.
	pacerStoreTimeout = 500 * time.Millisecond

	// pacerMargin is how late a call may end past its bound on a loaded
	// machine: the scheduler, the race detector, the response read after
	// the last check of the Deadline.
	pacerMargin = time.Second
)

// pacerResult is what a child process reports. Calls are counted in the
// phase when they began; fallbacks in the phase when they happened.
type pacerResult struct {
	Shared, Alone                   pacerPhase
	FallbacksShared, FallbacksAlone int64
}

type pacerPhase struct {
	Calls, OK int64         // calls, and those answered 200
	Longest   time.Duration // the longest call
	Late      int64         // calls that ended past their bound
}

// quotaServer admits requests from one token bucket and answers with
// OpenAI's headers, counting what it admits and refuses before redis-server
// is killed, after, and once the run is over.
type quotaServer struct {
	cut, stop time.Time

	mu                sync.Mutex // protects the fields below
	level             float64
	at                time.Time
	admitted, refused [3]int64 // shared, alone, after the stop
}

func (q *quotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	phase := 0
	switch {
	case !now.Before(q.stop):
		phase = 2
	case !now.Before(q.cut):
		phase = 1
	}
	q.mu.Lock()
	q.level = math.Min(quotaLimit, q.level+quotaRate*now.Sub(q.at).Seconds())
	q.at = now
	ok := q.level >= 1
	if ok {
		q.level--
		q.admitted[phase]++
	} else {
		q.refused[phase]++
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

func (q *quotaServer) counts() (admitted, refused [3]int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.admitted, q.refused
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
	shared := pacerSharedPhase(t)
	addr, kill := startRedisServer(t)
	q, results := runPacerFleet(t, addr, kill, shared)
	admitted, refused := q.counts()
	quota := quotaInitial + quotaRate*shared.Seconds() // what the server could admit while Redis was up
	logPacerFleet(t, "shared", admitted[0], refused[0], shared, quota, results, func(r pacerResult) (pacerPhase, int64) {
		return r.Shared, r.FallbacksShared
	})
	logPacerFleet(t, "redis-server killed", admitted[1], refused[1], pacerAlone, quotaRate*pacerAlone.Seconds(), results,
		func(r pacerResult) (pacerPhase, int64) { return r.Alone, r.FallbacksAlone })

	// At most 1% refused, and most of the quota used: a fleet that sent
	// nothing would be refused nothing. The bucket's initial requests
	// count too.
	if attempts := admitted[0] + refused[0]; refused[0]*100 > attempts {
		t.Errorf("with Redis: %d of %d attempts refused, over 1%%", refused[0], attempts)
	}
	if float64(admitted[0]) < 0.6*quota {
		t.Errorf("with Redis: %d requests admitted, under 60%% of the %.0f the quota allowed", admitted[0], quota)
	}
	for i, r := range results {
		if r.FallbacksShared != 0 {
			t.Errorf("child %d fell back %d times while Redis was up", i, r.FallbacksShared)
		}
		if r.Shared.Late+r.Alone.Late != 0 {
			t.Errorf("child %d: %d calls ended past their Deadline with Redis, %d without; the longest took %v and %v",
				i, r.Shared.Late, r.Alone.Late, r.Shared.Longest, r.Alone.Longest)
		}
		// Without Redis the processes no longer coordinate, so refusals
		// are expected; what matters is that each falls back and that its
		// calls go on succeeding.
		if r.FallbacksAlone == 0 {
			t.Errorf("child %d never fell back after redis-server was killed", i)
		}
		if r.Alone.OK == 0 {
			t.Errorf("child %d: none of its %d calls succeeded after redis-server was killed", i, r.Alone.Calls)
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
	shared := pacerSharedPhase(t)
	q, results := runPacerFleet(t, "", nil, shared)
	admitted, refused := q.counts()
	d := shared + pacerAlone
	logPacerFleet(t, "uncoordinated", admitted[0]+admitted[1], refused[0]+refused[1], d, quotaInitial+quotaRate*d.Seconds(),
		results, func(r pacerResult) (pacerPhase, int64) {
			return pacerPhase{Calls: r.Shared.Calls + r.Alone.Calls, OK: r.Shared.OK + r.Alone.OK,
				Longest: max(r.Shared.Longest, r.Alone.Longest), Late: r.Shared.Late + r.Alone.Late}, 0
		})
	for i, r := range results {
		if r.Shared.Late+r.Alone.Late != 0 {
			t.Errorf("child %d: %d calls ended past their Deadline", i, r.Shared.Late+r.Alone.Late)
		}
	}
	if refused[0]+refused[1] == 0 {
		t.Errorf("no attempt refused: the fleet did not press on its quota")
	}
}

// pacerSharedPhase returns how long the fleet runs on Redis:
// RETRYREDIS_FLEET_SHARED, a duration, when set, to watch the shared
// queue for longer than CI affords; else pacerShared.
func pacerSharedPhase(t *testing.T) time.Duration {
	v := os.Getenv("RETRYREDIS_FLEET_SHARED")
	if v == "" {
		return pacerShared
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("RETRYREDIS_FLEET_SHARED=%q: want a positive duration", v)
	}
	return d
}

// logPacerFleet logs one phase of a run, summed over the children: the
// server could admit quota requests in those d.
func logPacerFleet(t *testing.T, name string, admitted, refused int64, d time.Duration, quota float64,
	results []pacerResult, phase func(pacerResult) (pacerPhase, int64)) {
	t.Helper()
	var sum pacerPhase
	var fallbacks []int64
	for _, r := range results {
		p, f := phase(r)
		sum.Calls += p.Calls
		sum.OK += p.OK
		sum.Longest = max(sum.Longest, p.Longest)
		fallbacks = append(fallbacks, f)
	}
	attempts := max(admitted+refused, 1)
	t.Logf("%s, %.0f s: %d attempts, %d refused (%.1f%%), %d admitted (%.0f%% of the quota); "+
		"%d calls, %d succeeded; the longest %v; fallbacks per process %v",
		name, d.Seconds(), admitted+refused, refused, 100*float64(refused)/float64(attempts), admitted,
		100*float64(admitted)/quota, sum.Calls, sum.OK, sum.Longest.Round(time.Millisecond), fallbacks)
}

// runPacerFleet runs the quota server and the children, which share the
// redis-server at addr (none when empty); kill, when set, kills it after
// shared.
func runPacerFleet(t *testing.T, addr string, kill func(), shared time.Duration) (*quotaServer, []pacerResult) {
	t.Helper()
	start := time.Now().Add(500 * time.Millisecond) // time for the children to start
	cut := start.Add(shared)
	stop := cut.Add(pacerAlone)
	q := &quotaServer{cut: cut, stop: stop, level: quotaInitial, at: start}
	srv := httptest.NewServer(q)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := uniqueName(t)
	outs := make([]*bytes.Buffer, fleetProcesses)
	cmds := make([]*exec.Cmd, fleetProcesses)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFleetPacerChild$", "-test.v")
		cmd.Env = append(os.Environ(), "RETRYREDIS_PACER_CHILD=1", "RETRYREDIS_PACER_URL="+srv.URL,
			"RETRYREDIS_PACER_REDIS="+addr, "RETRYREDIS_PACER_NAME="+name,
			fmt.Sprintf("RETRYREDIS_PACER_TIMES=%d,%d,%d", start.UnixNano(), cut.UnixNano(), stop.UnixNano()))
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	time.Sleep(time.Until(cut))
	if kill != nil {
		kill()
	}
	var results []pacerResult
	for i, cmd := range cmds {
		err := cmd.Wait()
		r, ok := parseChildResult[pacerResult](outs[i].String(), pacerTag)
		if err != nil || !ok {
			t.Fatalf("child %d: %v; output:\n%s", i, err, outs[i])
		}
		results = append(results, r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, out := range outs {
				t.Logf("child %d:\n%s", i, out)
			}
		}
	})
	return q, results
}

// TestFleetPacerChild is one process of TestFleetPacer; it runs only as
// its child.
func TestFleetPacerChild(t *testing.T) {
	if os.Getenv("RETRYREDIS_PACER_CHILD") == "" {
		t.Skip("a child of TestFleetPacer")
	}
	var times [3]time.Time
	for i, f := range strings.Split(os.Getenv("RETRYREDIS_PACER_TIMES"), ",") {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || i >= len(times) {
			t.Fatalf("RETRYREDIS_PACER_TIMES: %q", os.Getenv("RETRYREDIS_PACER_TIMES"))
		}
		times[i] = time.Unix(0, n)
	}
	start, cut, stop := times[0], times[1], times[2]

	var fallbacks [2]atomic.Int64 // shared, alone
	pacer := &retry.Pacer{OnFallback: func(error) {
		if time.Now().Before(cut) {
			fallbacks[0].Add(1)
		} else {
			fallbacks[1].Add(1)
		}
	}}
	if addr := os.Getenv("RETRYREDIS_PACER_REDIS"); addr != "" {
		// No retries in the client, one dial: once redis-server is dead
		// a store call fails at once instead of spending its timeout.
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			DialerRetries: 1})
		defer rdb.Close()
		pacer.Store = NewPacerStore(rdb, os.Getenv("RETRYREDIS_PACER_NAME"))
		pacer.StoreTimeout = pacerStoreTimeout
	}
	base := &http.Transport{MaxIdleConnsPerHost: fleetGoroutines}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &retry.Transport{Base: base, Policy: retry.Policy{Deadline: pacerDeadline},
		Pacer: pacer}}
	url := os.Getenv("RETRYREDIS_PACER_URL")

	var r pacerResult
	var mu sync.Mutex // protects r
	var wg sync.WaitGroup
	for g := range fleetGoroutines {
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(g)))
		// Thinking times drawn from an exponential law, the first one
		// included: the fleet's calls arrive as a Poisson stream of
		// pacerDemand a second while no caller waits.
		think := func() time.Duration {
			mean := float64(fleetProcesses*fleetGoroutines) / pacerDemand
			return time.Duration(rng.ExpFloat64() * mean * float64(time.Second))
		}
		wg.Go(func() {
			var shared, alone pacerPhase
			for began := start.Add(think()); began.Before(stop); began = time.Now().Add(think()) {
				time.Sleep(time.Until(began))
				began = time.Now()
				ok := pacerCall(t, client, url)
				ended := time.Now()
				ph, late := &shared, pacerDeadline+pacerMargin
				if began.After(cut) {
					ph = &alone
				}
				if ended.After(cut) {
					late += pacerStoreTimeout // one store call may begin just before the Deadline
				}
				ph.add(ended.Sub(began), ok, late)
			}
			mu.Lock()
			defer mu.Unlock()
			r.Shared.merge(shared)
			r.Alone.merge(alone)
		})
	}
	wg.Wait()
	r.FallbacksShared, r.FallbacksAlone = fallbacks[0].Load(), fallbacks[1].Load()
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(append([]byte(pacerTag), append(out, '\n')...))
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

func (p *pacerPhase) add(took time.Duration, ok bool, late time.Duration) {
	p.Calls++
	if ok {
		p.OK++
	}
	p.Longest = max(p.Longest, took)
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
