package retryredis

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// The fleet: processes that share one budget, each with goroutines that
// retry as fast as the budget lets them against a service that always
// fails. The floor dominates the rule, so that what sharing saves shows:
// uncoordinated, each process would have a floor of its own.
const (
	fleetProcesses  = 4
	fleetGoroutines = 50
	fleetRatio      = 0.001
	fleetFloor      = 200.0 // retries per second, for the fleet
	fleetWindow     = time.Second
	fleetShared     = 2500 * time.Millisecond // then Redis is cut off
	fleetAfter      = 2 * time.Second         // running on local limits
	fleetDeadline   = time.Second             // of each call
	fleetTimeout    = time.Second             // StoreTimeout: a busy machine must not miss it while Redis is up
	fleetResultTag  = "FLEET-RESULT "

	// fleetLate is when a call is late: a retry may wait StoreTimeout on
	// the store after the loop checked the deadline, and the machine is
	// shared by 200 goroutines under the race detector, and others.
	fleetLate = fleetDeadline + fleetTimeout + time.Second
)

// fleetResult is what a child process reports.
type fleetResult struct {
	Before, After         phaseCount // retries spent before and after the cut, as seen by each call
	FallbacksBefore       int64      // store failures before the cut: none expected
	FallbacksAfter        int64
	MaxCallBefore         time.Duration // the longest call that began before the cut
	MaxCallAfter          time.Duration // the longest call that began after the cut
	CallsOverDeadline     int64
	Started, Cut, Stopped time.Time
}

type phaseCount struct {
	Calls, Retries int64
}

// TestFleet runs fleetProcesses copies of this test binary, sharing one
// budget through a real Redis reached through a proxy that the test cuts
// mid-run. While Redis is up, the retries of all processes together stay
// within one budget's allowance; once it is cut, every call still ends
// within its deadline and the processes fall back to their own limits.
func TestFleet(t *testing.T) {
	addr := redisAddr(t)
	realRedis(t) // fail early if it does not answer
	if testing.Short() {
		t.Skip("the fleet runs for several seconds")
	}
	px := startProxy(t, addr)
	start := time.Now().Add(500 * time.Millisecond) // time for the children to start
	cut := start.Add(fleetShared)
	stop := cut.Add(fleetAfter)
	name := uniqueName(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results := runChildren[fleetResult](t, ctx, "TestFleetChild", fleetResultTag, []string{
		"RETRYREDIS_FLEET_CHILD=1", "RETRY_REDIS_ADDR=" + px.addr(), "RETRYREDIS_FLEET_NAME=" + name,
		"RETRYREDIS_FLEET_TIMES=" + fleetTimes(start, cut, stop)}, cut, px.cut)
	checkFleet(t, results, start, cut)
}

// checkFleet checks the children's results against the rule.
func checkFleet(t *testing.T, results []fleetResult, start, cut time.Time) {
	t.Helper()
	var before, after phaseCount
	for i, r := range results {
		before.Calls += r.Before.Calls
		before.Retries += r.Before.Retries
		after.Calls += r.After.Calls
		after.Retries += r.After.Retries
		if r.FallbacksBefore != 0 {
			t.Errorf("child %d fell back %d times while Redis was up", i, r.FallbacksBefore)
		}
		if r.FallbacksAfter == 0 {
			t.Errorf("child %d never fell back after Redis was cut", i)
		}
		if r.CallsOverDeadline != 0 || r.MaxCallAfter > fleetLate {
			t.Errorf("child %d: %d calls over their deadline; the longest after the cut took %v",
				i, r.CallsOverDeadline, r.MaxCallAfter)
		}
		// Each process on its own window after the cut, which still holds
		// the retries it spent from leases.
		afterSecs := r.Stopped.Sub(cut).Seconds()
		local := fleetRatio*float64(r.After.Calls) + fleetFloor*(math.Ceil(afterSecs/fleetWindow.Seconds())+1)
		if float64(r.After.Retries) > local {
			t.Errorf("child %d: %d retries after the cut, above its local allowance of %.0f", i, r.After.Retries, local)
		}
	}
	// The store's window is cut in ten slices; any run of ten is one
	// window, so a span of s seconds sees at most ceil(s/W)+1 windows.
	secs := cut.Sub(start).Seconds()
	windows := math.Ceil(secs/fleetWindow.Seconds()) + 1
	shared := fleetRatio*float64(before.Calls) + fleetFloor*fleetWindow.Seconds()*windows
	t.Logf("with Redis: %d processes made %d calls and %d retries in %.1f s (%.0f retries/s); allowance %.0f, uncoordinated %.0f",
		len(results), before.Calls, before.Retries, secs, float64(before.Retries)/secs, shared,
		fleetRatio*float64(before.Calls)+float64(len(results))*fleetFloor*fleetWindow.Seconds()*windows)
	var longest, longestBefore time.Duration
	var fallbacks int64
	for _, r := range results {
		longest = max(longest, r.MaxCallAfter)
		longestBefore = max(longestBefore, r.MaxCallBefore)
		fallbacks += r.FallbacksAfter
	}
	t.Logf("longest call with Redis up: %v", longestBefore.Round(time.Millisecond))
	t.Logf("Redis cut: %d calls and %d retries in %.1f s (%.0f retries/s), every process on its own window; "+
		"%d fallbacks reported; the longest call %v", after.Calls, after.Retries, fleetAfter.Seconds(),
		float64(after.Retries)/fleetAfter.Seconds(), fallbacks, longest.Round(time.Millisecond))
	if float64(before.Retries) > shared {
		t.Errorf("over-grant: %d retries while Redis was up, allowance %.0f", before.Retries, shared)
	}
	if before.Retries < int64(fleetFloor*secs/2) {
		t.Errorf("only %d retries while Redis was up: the fleet did not spend its budget", before.Retries)
	}
}

// parseChildResult reads the result line that a child process wrote,
// tagged, among its test output.
func parseChildResult[T any](out, tag string) (T, bool) {
	var r T
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), tag); ok {
			return r, json.Unmarshal([]byte(line), &r) == nil
		}
	}
	return r, false
}

// runChildren runs fleetProcesses copies of the test binary, each running
// test alone with env added, calls atCut (if any) at cut, and returns what
// each wrote after tag. A child that fails, or writes no result, fails t
// with its output; when t fails, every child's output is logged.
func runChildren[T any](t *testing.T, ctx context.Context, test, tag string, env []string, cut time.Time,
	atCut func()) []T {
	t.Helper()
	outs := make([]*bytes.Buffer, fleetProcesses)
	cmds := make([]*exec.Cmd, fleetProcesses)
	t.Cleanup(func() {
		if t.Failed() {
			for i, out := range outs {
				t.Logf("child %d:\n%s", i, out)
			}
		}
	})
	for i := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v")
		cmd.Env = append(os.Environ(), env...)
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	time.Sleep(time.Until(cut))
	if atCut != nil {
		atCut()
	}
	results := make([]T, 0, len(cmds))
	for i, cmd := range cmds {
		err := cmd.Wait()
		r, ok := parseChildResult[T](outs[i].String(), tag)
		if err != nil || !ok {
			t.Fatalf("child %d: %v; output:\n%s", i, err, outs[i])
		}
		results = append(results, r)
	}
	return results
}

// fleetTimes writes start, cut and stop for a child's environment;
// childTimes reads them back from the variable v.
func fleetTimes(start, cut, stop time.Time) string {
	return fmt.Sprintf("%d,%d,%d", start.UnixNano(), cut.UnixNano(), stop.UnixNano())
}

func childTimes(t *testing.T, v string) (start, cut, stop time.Time) {
	t.Helper()
	var ns [3]int64
	if _, err := fmt.Sscanf(os.Getenv(v), "%d,%d,%d", &ns[0], &ns[1], &ns[2]); err != nil {
		t.Fatalf("%s=%q: %v", v, os.Getenv(v), err)
	}
	return time.Unix(0, ns[0]), time.Unix(0, ns[1]), time.Unix(0, ns[2])
}

// writeChildResult writes r on the line, after tag, that the parent reads
// with parseChildResult.
func writeChildResult(t *testing.T, tag string, r any) {
	t.Helper()
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.Write(append([]byte(tag), append(out, '\n')...))
}

// TestFleetChild is one process of TestFleet; it runs only as its child.
func TestFleetChild(t *testing.T) {
	if os.Getenv("RETRYREDIS_FLEET_CHILD") == "" {
		t.Skip("a child of TestFleet")
	}
	start, cut, stop := childTimes(t, "RETRYREDIS_FLEET_TIMES")
	// No retries in the client: the Budget falls back on its own, and a
	// client that dials five times before it fails holds retries up for
	// the whole StoreTimeout once Redis is gone.
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("RETRY_REDIS_ADDR"), ContextTimeoutEnabled: true,
		MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()

	r := fleetProcess(t, rdb, os.Getenv("RETRYREDIS_FLEET_NAME"), start, cut, stop, nil)
	writeChildResult(t, fleetResultTag, r)
}

// proxy forwards TCP connections to a Redis until it is cut: then it
// closes its listener and every connection, as a Redis that went away.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex // protects conns and closed
	conns  []net.Conn
	closed bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Go(func() { io.Copy(up, c); up.Close() })
		p.wg.Go(func() { io.Copy(c, up); c.Close() })
	}
}

// track records the connections, or closes them if the proxy is cut.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// fleetProcess is one process of a fleet test: fleetGoroutines callers
// on a Budget whose store is the budget called name on client, from start
// to stop, each retrying as fast as the budget lets it. At cut it calls
// atCut, if any (the process's own cut; without one, the cut comes from
// outside), and it counts what happened before the cut and after.
func fleetProcess(t *testing.T, client redis.Scripter, name string, start, cut, stop time.Time, atCut func()) fleetResult {
	// A little before the cut, so that nothing counted as before it ran
	// on local limits.
	isBefore := func(at time.Time) bool { return at.Before(cut.Add(-50 * time.Millisecond)) }
	var r fleetResult
	var fallbacks, retries [2]atomic.Int64 // before and after the cut
	budget := &retry.Budget{
		Ratio: fleetRatio, MinPerSecond: fleetFloor, Window: fleetWindow,
		Store: NewBudgetStore(client, name), StoreTimeout: fleetTimeout,
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
	if atCut != nil {
		time.Sleep(time.Until(cut))
		atCut()
	}
	wg.Wait()
	r.Cut, r.Stopped = cut, time.Now()
	r.Before.Retries, r.After.Retries = retries[0].Load(), retries[1].Load()
	r.FallbacksBefore, r.FallbacksAfter = fallbacks[0].Load(), fallbacks[1].Load()
	return r
}
