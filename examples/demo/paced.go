package main

// Scenario 6: callers that share an API key and a pace.Pacer against a
// server that enforces a rate limit and announces it.

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// The paced callers and the rate limit they share.
const (
	pacedCallers = 4  // goroutines sharing one API key
	pacedCalls   = 4  // calls each makes
	pacedLimit   = 10 // requests a second the server allows, as Anthropic's limits are a minute
)

// paced runs pacedCallers goroutines that share one API key and one
// pace.Pacer against a server that enforces a rate limit and announces it
// in Anthropic's headers, and prints their timeline; then the same calls
// without the Pacer.
func paced(w io.Writer) error {
	lim := &limiter{burst: pacedLimit, interval: time.Second / pacedLimit}
	srv, err := startServer(lim)
	if err != nil {
		return err
	}
	defer srv.close()
	fmt.Fprintf(w, "%d callers share one API key and one pace.Pacer: the server allows %d requests a second (%d at once,\n"+
		"   then one more every %v) and says so in its anthropic-ratelimit-requests-* headers; a first call teaches them to the Pacer\n",
		pacedCallers, lim.burst, lim.burst, lim.interval)
	var mu sync.Mutex // keeps the callers' lines whole
	start := time.Now()
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "  %6.3fs  "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err == nil {
			say("%s: %s %s -> %s (remaining %s)", req.Header.Get("X-Caller"), req.Method, req.URL.Path,
				resp.Status, resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining"))
		}
		return resp, err
	})
	// One Pacer per API key, shared by every caller that uses the key.
	pacer := &pace.Pacer{
		// In production, pace.LogWaits logs the waits that matter.
		OnWait: func(e pace.Event) { say("pacing: a call waits %v for its turn", e.Delay.Round(time.Millisecond)) },
	}
	client := &http.Client{Transport: &retry.Transport{Base: base, Pacer: pacer,
		Policy: retry.Policy{MaxAttempts: 4, Deadline: 10 * time.Second}}}
	// A Pacer paces a key once a response has told it the limit: until
	// then, callers that start together are not held back.
	callers := make([]string, pacedCallers)
	for i := range callers {
		callers[i] = "caller " + strconv.Itoa(i+1)
	}
	failed := callAll(srv.url, client, []string{"first call"}, 1)
	failed += callAll(srv.url, client, callers, pacedCalls)
	served, refused := lim.reset()
	say("%d calls, %d failed: %d requests served, %d refused with 429", 1+pacedCallers*pacedCalls, failed, served, refused)

	// Without the Pacer, nothing holds the callers back.
	failed = callAll(srv.url, &http.Client{Transport: &retry.Transport{Policy: retry.Policy{MaxAttempts: 1}}}, callers, pacedCalls)
	served, refused = lim.reset()
	say("the same %d callers without the Pacer, not retried: %d calls, %d failed: %d served, %d refused with 429",
		pacedCallers, pacedCallers*pacedCalls, failed, served, refused)
	return nil
}

// callAll starts a goroutine for each of the callers named, which makes
// calls calls through client, and returns how many failed.
func callAll(url string, client *http.Client, callers []string, calls int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex // protects failed
	failed := 0
	for _, name := range callers {
		wg.Go(func() {
			for range calls {
				req, err := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"prompt":"Hi"}`))
				if err != nil {
					panic(err) // the URL is the server's own
				}
				req.Header.Set("X-Api-Key", "sk-ant-demo") // one key: the Pacer paces by it
				req.Header.Set("X-Caller", name)
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// limiter is an API with a rate limit: a token bucket that holds burst
// requests and gets one back every interval. Every answer reports the
// bucket in Anthropic's anthropic-ratelimit-requests-* headers; a request
// that finds it empty gets a 429.
type limiter struct {
	burst    int
	interval time.Duration

	mu      sync.Mutex // protects the fields below
	full    time.Time  // when the bucket is full again
	served  int
	refused int
}

// ServeHTTP serves r if the bucket holds a request, and refuses it with a
// 429 if not.
func (l *limiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	now := time.Now()
	l.mu.Lock()
	lack := max(l.full.Sub(now), 0) // the time the bucket needs to fill up
	ok := lack+l.interval <= time.Duration(l.burst)*l.interval
	if ok {
		lack += l.interval
		l.full = now.Add(lack)
		l.served++
	} else {
		l.refused++
	}
	l.mu.Unlock()
	// Whole requests only: remaining is rounded down, and the reset is when
	// the bucket is full from there, so that the refill rate the headers
	// imply, (limit - remaining) / (reset - now), is the bucket's own.
	// Anthropic dates the reset to the second and sends a Date header; here
	// the reset is dated to the millisecond and Date is left out, so that
	// the Pacer reads the reset against its own clock, which is the
	// server's.
	used := int((lack + l.interval - 1) / l.interval)
	reset := now.Add(time.Duration(used) * l.interval).Add(time.Millisecond - 1).Truncate(time.Millisecond)
	h := w.Header()
	h["Date"] = nil
	h.Set("Content-Type", "application/json")
	h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(l.burst))
	h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(l.burst-used))
	h.Set("Anthropic-Ratelimit-Requests-Reset", reset.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	if !ok {
		h.Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit."}}`)
		return
	}
	_, _ = io.WriteString(w, `{"type":"message","content":[{"type":"text","text":"Hello!"}]}`)
}

// reset returns the requests served and refused since the last reset, and
// fills the bucket.
func (l *limiter) reset() (served, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	served, refused = l.served, l.refused
	l.served, l.refused, l.full = 0, 0, time.Time{}
	return served, refused
}
