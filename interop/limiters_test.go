package interop_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// The real-limiter test: express-rate-limit 8.7.5 and @fastify/rate-limit
// 11.2.0 (npm, pinned by limiters/package-lock.json) on loopback, in each
// of their header modes, each with a limit of 50 requests a window, and 8
// callers on one key through a Transport with a Pacer. Counted from the
// second window on (the first is the burst before anything is known):
// at most 1% of attempts refused, at least 90% of the quota used.
//
// RETRY_LIMITERS_WINDOW (default 30s) and RETRY_LIMITERS_WINDOWS (the
// windows measured after the first, default 3) shorten a run by hand;
// RETRY_LIMITERS_BASELINE=1 also runs each mode without a Pacer, for the
// table in docs/pacing.md, and RETRY_LIMITERS_REPORT=path writes the table.

var limiterModes = []string{
	"express-legacy", "express-draft6", "express-draft7", "express-draft8",
	"fastify-default", "fastify-draft",
}

const (
	limiterQuota   = 50
	limiterCallers = 8
)

// limiterRun is what one mode's run counted, from the second window on.
type limiterRun struct {
	mode      string
	paced     bool
	attempts  int
	refused   int
	succeeded int
	windows   float64 // how many of the server's windows the count spans
}

func (r limiterRun) refusedShare() float64 {
	if r.attempts == 0 {
		return 0
	}
	return float64(r.refused) / float64(r.attempts)
}

func (r limiterRun) quotaUsed() float64 { return float64(r.succeeded) / (limiterQuota * r.windows) }

func TestRealLimiters(t *testing.T) {
	node := limitersReady(t)
	window := envDuration(t, "RETRY_LIMITERS_WINDOW", 30*time.Second)
	windows := envInt(t, "RETRY_LIMITERS_WINDOWS", 3)
	baseline := os.Getenv("RETRY_LIMITERS_BASELINE") == "1"
	var (
		mu   sync.Mutex
		runs []limiterRun
	)
	t.Cleanup(func() {
		report := limiterTable(runs)
		t.Log("\n" + report)
		if path := os.Getenv("RETRY_LIMITERS_REPORT"); path != "" {
			if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
				t.Errorf("writing the report: %v", err)
			}
		}
	})
	// Every mode runs at once, whatever -parallel says: a run lasts
	// several windows, and the servers use little of the machine.
	type job struct {
		mode  string
		paced bool
	}
	var jobs []job
	for _, mode := range limiterModes {
		jobs = append(jobs, job{mode, true})
		if baseline {
			jobs = append(jobs, job{mode, false})
		}
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			r, err := runLimiter(t, node, j.mode, j.paced, window, windows)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			runs = append(runs, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, r := range runs {
		name := r.mode
		if !r.paced {
			name += "/no-pacer"
		}
		t.Run(name, func(t *testing.T) {
			t.Logf("%d attempts, %.2f%% refused, %.1f%% of the quota used", r.attempts,
				100*r.refusedShare(), 100*r.quotaUsed())
			if !r.paced {
				return
			}
			if r.refusedShare() > 0.01 {
				t.Errorf("%.2f%% of attempts refused (%d of %d), want at most 1%%", 100*r.refusedShare(), r.refused, r.attempts)
			}
			if r.quotaUsed() < 0.90 {
				t.Errorf("%.1f%% of the quota used (%d of %.0f), want at least 90%%", 100*r.quotaUsed(), r.succeeded,
					limiterQuota*r.windows)
			}
		})
	}
}

// limitersReady returns the path of node, with the npm packages installed
// from the lock file; it skips the test where node is missing, except
// under CI=true, where it fails.
func limitersReady(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = exec.LookPath("npm")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and npm are needed for the real limiters: %v", err)
		}
		t.Skipf("node and npm are needed for the real limiters: %v", err)
	}
	dir, err := filepath.Abs("limiters")
	if err != nil {
		t.Fatal(err)
	}
	// npm ci writes node_modules/.package-lock.json: when it is older
	// than the lock file, the packages are stale.
	lock, err1 := os.Stat(filepath.Join(dir, "package-lock.json"))
	inst, err2 := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err1 != nil {
		t.Fatal(err1)
	}
	if err2 != nil || inst.ModTime().Before(lock.ModTime()) {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return node
}

// runLimiter starts mode's server and drives it for one window plus
// windows more, and returns what it counted after the first.
func runLimiter(t *testing.T, node, mode string, paced bool, window time.Duration, windows int) (limiterRun, error) {
	addr, err := startLimiter(t, node, mode, window)
	if err != nil {
		return limiterRun{}, err
	}
	counter := &attemptCounter{base: plainTransport()}
	t.Cleanup(counter.base.CloseIdleConnections)
	tr := &retry.Transport{Base: counter, Policy: retry.Policy{Deadline: 2*window + 10*time.Second}}
	if paced {
		tr.Pacer = &pace.Pacer{}
	}
	client := &http.Client{Transport: tr}
	start := time.Now()
	from, end := start.Add(window), start.Add(time.Duration(1+windows)*window)
	// No call starts after end, and those still waiting are cut a second
	// later: a call whose context ends sooner could not wait out a
	// Retry-After, and would be refused again at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(time.Until(end)+time.Second, cancel)
	defer stop.Stop()
	var wg sync.WaitGroup
	for range limiterCallers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	r := limiterRun{mode: mode, paced: paced, windows: float64(windows)}
	for _, a := range counter.list() {
		if a.at.Before(from) || !a.at.Before(end) || a.err != nil {
			continue // the first window's burst, after the run, or an attempt cut at the end
		}
		r.attempts++
		switch a.status {
		case http.StatusTooManyRequests:
			r.refused++
		case http.StatusOK:
			r.succeeded++
		}
	}
	return r, nil
}

// startLimiter starts mode's server with the test's quota and window and
// returns its address; it stops when the test ends. It may run on a
// goroutine of the test's.
func startLimiter(t *testing.T, node, mode string, window time.Duration) (string, error) {
	cmd := exec.Command(node, "server.js", mode, strconv.Itoa(limiterQuota), strconv.FormatInt(window.Milliseconds(), 10))
	cmd.Dir = "limiters"
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // the server exits when it closes
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if addr, ok := strings.CutPrefix(l, "listening "); ok {
			return addr, nil
		}
		return "", fmt.Errorf("%s: the server said %q", mode, l)
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("%s: the server did not start in 30s", mode)
	}
}

// attempt is one request that reached the wire.
type attempt struct {
	at     time.Time
	status int
	err    error
}

// attemptCounter is a RoundTripper that records every attempt the
// Transport makes through it.
type attemptCounter struct {
	base *http.Transport
	mu   sync.Mutex
	all  []attempt
}

func (c *attemptCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	at := time.Now()
	resp, err := c.base.RoundTrip(req)
	a := attempt{at: at, err: err}
	if err == nil {
		a.status = resp.StatusCode
	}
	c.mu.Lock()
	c.all = append(c.all, a)
	c.mu.Unlock()
	return resp, err
}

func (c *attemptCounter) list() []attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]attempt(nil), c.all...)
}

// limiterTable is the runs as a markdown table, in the modes' order.
func limiterTable(runs []limiterRun) string {
	var b strings.Builder
	b.WriteString("| server, header mode | Pacer | attempts | refused | quota used |\n| --- | --- | ---: | ---: | ---: |\n")
	for _, mode := range limiterModes {
		for _, paced := range []bool{true, false} {
			for _, r := range runs {
				if r.mode == mode && r.paced == paced {
					p := "yes"
					if !paced {
						p = "no"
					}
					fmt.Fprintf(&b, "| %s | %s | %d | %.2f%% | %.1f%% |\n", r.mode, p, r.attempts, 100*r.refusedShare(), 100*r.quotaUsed())
				}
			}
		}
	}
	return b.String()
}

func envDuration(t *testing.T, k string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", k, v)
	}
	return d
}

func envInt(t *testing.T, k string, def int) int {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", k, v)
	}
	return n
}
