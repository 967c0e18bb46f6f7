package proxies_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// inFlight is how long the upstream takes over the first request of
// each call in a reload test: longer than the old worker is given to
// finish, so the reload cuts it.
const inFlight = 3 * time.Second

// reloadCall is one call in flight while a proxy reloads.
type reloadCall struct {
	call
	replayable bool // sent through a Transport whose Replayable returns true
	once       bool // may not run twice: only its upstream count is asserted
}

// reloadCalls are the calls TestReload keeps in flight: what may run twice
// (GET, PUT, a keyed POST, a POST a Replayable allows), and a POST that
// may not.
func reloadCalls() []reloadCall {
	body := payload(16<<10, 4)
	return []reloadCall{
		{call: call{Method: http.MethodGet, ID: "get"}},
		{call: call{Method: http.MethodPut, ID: "put", Body: body}},
		{call: call{Method: http.MethodPost, ID: "keyed", Body: body, Key: "key-4"}},
		{call: call{Method: http.MethodPost, ID: "replayable", Body: body}, replayable: true},
		{call: call{Method: http.MethodPost, ID: "keyless", Body: body}, once: true},
	}
}

// TestReload: a proxy serving HTTP/2 over TLS reloads while five calls
// wait on a slow upstream, multiplexed on one connection. The old worker
// is given a second to finish (nginx worker_shutdown_timeout, haproxy
// hard-stop-after), then cut off. What may run twice is sent again and
// succeeds; the keyless POST must not reach the upstream twice.
//
// haproxy 2.6 breaks an HTTP/2 rule there: at hard-stop-after it resets
// every stream it had already forwarded with REFUSED_STREAM, which RFC
// 9113, section 8.7, reserves for streams that were not processed at all.
// net/http's HTTP/2 transport believes it and sends again, by itself, any
// request whose attempt has GetBody; the Transport gives none to what must
// not run twice, so the keyless POST still reaches the upstream once.
func TestReload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		start func(t *testing.T, upstream string, tf *tlsFiles) (url string, reload func())
	}{
		{
			name: "nginx",
			start: func(t *testing.T, upstream string, tf *tlsFiles) (string, func()) {
				n := startNginx(t, nginxOpts{
					Upstreams: []string{upstream},
					Main:      "worker_shutdown_timeout 1s;",
					TLS:       tf,
				})
				t.Cleanup(func() {
					t.Logf("nginx error.log:\n%s", grepLines(n.errorLog(), "signal", "exit", "shutdown", "timeout"))
				})
				return n.url, func() { n.reload(t) }
			},
		},
		{
			name: "haproxy",
			start: func(t *testing.T, upstream string, tf *tlsFiles) (string, func()) {
				h := startHAProxy(t, haproxyOpts{
					Servers:      []string{upstream},
					Global:       "hard-stop-after 1s",
					TLS:          tf,
					MasterWorker: true,
				})
				t.Cleanup(func() {
					t.Logf("haproxy output:\n%s", grepLines(h.output(), "Reload", "stop", "worker"))
				})
				return h.url, func() { h.reload(t) }
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tf := selfSigned(t, t.TempDir())
			up := newUpstream(t)
			up.script = func(id string, n int) reply {
				if n == 1 && !strings.HasPrefix(id, "warm") {
					return reply{Delay: inFlight}
				}
				return reply{}
			}
			url, reload := tc.start(t, up.addr, &tf)
			testReload(t, up, url, tf, reload)
		})
	}
}

// testReload makes the calls through url, reloads the proxy once the
// upstream has them all, and checks what each call got.
func testReload(t *testing.T, up *upstream, url string, tf tlsFiles, reload func()) {
	base := h2Transport(tf.Pool)
	c := newClient(t, base, clientOpts{})
	cr := newClient(t, base, clientOpts{Replayable: func(*http.Request) bool { return true }})
	warm := call{Method: http.MethodGet, ID: "warm"}
	resp, err := c.Do(warm.request(t, context.Background(), url))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the proxy answered in %s, want HTTP/2", resp.Proto)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	calls := reloadCalls()
	results := make([]result, len(calls))
	var wg sync.WaitGroup
	for i, rc := range calls {
		cl := c
		if rc.replayable {
			cl = cr
		}
		req := rc.request(t, ctx, url)
		wg.Go(func() { results[i] = cl.send(req) })
	}
	if !up.waitCount(1+len(calls), 5*time.Second) {
		cancel()
		wg.Wait()
		t.Fatalf("upstream received %d requests, want %d in flight", up.count(), 1+len(calls))
	}
	began := time.Now()
	reload()
	wg.Wait()
	t.Logf("calls ended %v after the reload", time.Since(began).Round(10*time.Millisecond))

	for i, rc := range calls {
		res := results[i]
		cnt := c.count
		if rc.replayable {
			cnt = cr.count
		}
		got := len(up.calls(rc.ID))
		attempts := cnt.attempts(rc.ID)
		t.Logf("%s %s: caller got %v; attempts %q; upstream received %d", rc.Method, rc.ID, res, attempts, got)
		if rc.once {
			if got > 1 {
				t.Errorf("%s: upstream received the keyless POST %d times, want at most 1", rc.ID, got)
			}
			continue
		}
		if res.Err != nil || res.Status != http.StatusOK {
			t.Errorf("%s: caller got %v, want status 200", rc.ID, res)
		}
		if got < 1 || got > maxAttempts {
			t.Errorf("%s: upstream received %d requests, want 1 to %d", rc.ID, got, maxAttempts)
		}
	}
}

// grepLines returns the lines of s that contain any of words.
func grepLines(s string, words ...string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		for _, w := range words {
			if strings.Contains(line, w) {
				b.WriteString(line)
				break
			}
		}
	}
	return b.String()
}
