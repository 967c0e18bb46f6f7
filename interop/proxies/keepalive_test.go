package proxies_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keepAlive is nginx's keepalive_timeout for clients in
// TestKeepAliveRace, and holdIdle how long a request waits on the reused
// connection before it is written: long enough for nginx to have closed it.
const (
	keepAlive = time.Second
	holdIdle  = 1600 * time.Millisecond
)

// holdReused returns ctx with a client trace that, the first time a
// request gets a reused connection, waits holdIdle before net/http writes
// it, and a flag that says it did. It forces the race between a request
// and a server's keep-alive timeout: net/http took the connection from
// its pool while it was open, and finds it closed.
func holdReused(ctx context.Context) (context.Context, *atomic.Bool) {
	held := new(atomic.Bool)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused && held.CompareAndSwap(false, true) {
				time.Sleep(holdIdle)
			}
		},
	}), held
}

// TestKeepAliveRace: nginx closes a client's idle connection after
// keepalive_timeout just as the client sends on it. net/http sends a GET
// again by itself, but fails a PUT, a DELETE or a POST with "http: server
// closed idle connection" (its Request.isReplayable knows only GET, HEAD,
// OPTIONS, TRACE and keyed requests). The request never reached nginx, so
// the Transport sends again what may run twice, and the upstream sees it
// once. A POST without a key must never reach the upstream twice.
func TestKeepAliveRace(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	n := startNginx(t, nginxOpts{
		Upstreams: []string{up.addr},
		HTTP:      "keepalive_timeout " + keepAlive.String() + ";",
	})
	always := func(*http.Request) bool { return true }
	body := payload(8<<10, 3)
	tests := []struct {
		name       string
		call       call
		replayable func(*http.Request) bool
		keyless    bool // a POST that may not run twice: what it gets is recorded, not asserted
	}{
		{name: "PUT", call: call{Method: http.MethodPut, ID: "put", Body: body}},
		{name: "DELETE", call: call{Method: http.MethodDelete, ID: "delete"}},
		{name: "Replayable POST", call: call{Method: http.MethodPost, ID: "replayable", Body: body}, replayable: always},
		{name: "keyless POST", call: call{Method: http.MethodPost, ID: "keyless", Body: body}, keyless: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, plainTransport(), clientOpts{Replayable: tc.replayable})
			warm := call{Method: http.MethodGet, ID: "warm-" + tc.call.ID}
			if res := c.send(warm.request(t, context.Background(), n.url)); res.Err != nil || res.Status != http.StatusOK {
				t.Fatalf("first request: %v", res)
			}
			ctx, held := holdReused(context.Background())
			res := c.send(tc.call.request(t, ctx, n.url))
			if !held.Load() {
				t.Fatal("the second request did not get the first one's connection: no race forced")
			}
			attempts := c.count.attempts(tc.call.ID)
			got := len(up.calls(tc.call.ID))
			t.Logf("caller got %v; attempts %q; upstream received %d", res, attempts, got)
			if tc.keyless {
				if got > 1 {
					t.Errorf("upstream received the keyless POST %d times, want at most 1", got)
				}
				return
			}
			if res.Err != nil || res.Status != http.StatusOK {
				t.Errorf("caller got %v, want status 200", res)
			}
			if len(attempts) != 2 {
				t.Errorf("%d attempts (%q), want 2: the cut one and its retry", len(attempts), attempts)
			}
			if got != 1 {
				t.Errorf("upstream received %d requests, want 1", got)
			}
		})
	}
}

// TestKeepAliveRaceUnforced: keyless POSTs sent on a pooled connection at
// about the moment nginx's keepalive_timeout closes it, each a little
// earlier or later than the last, without holding any. What each got is
// logged, by kind; the upstream must never receive one twice.
func TestKeepAliveRaceUnforced(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	n := startNginx(t, nginxOpts{
		Upstreams: []string{up.addr},
		HTTP:      "keepalive_timeout " + keepAlive.String() + ";",
	})
	const calls = 40
	body := payload(64<<10, 7)
	outcomes := make([]string, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			c := newClient(t, plainTransport(), clientOpts{})
			warm := call{Method: http.MethodGet, ID: fmt.Sprintf("warm-%d", i)}
			if res := c.send(warm.request(t, context.Background(), n.url)); res.Err != nil {
				outcomes[i] = "warm-up failed: " + res.Err.Error()
				return
			}
			// From 20 ms before the close to 20 ms after, 1 ms apart.
			time.Sleep(keepAlive - 20*time.Millisecond + time.Duration(i)*time.Millisecond)
			post := call{Method: http.MethodPost, ID: fmt.Sprintf("post-%d", i), Body: body}
			res := c.send(post.request(t, context.Background(), n.url))
			outcomes[i] = strings.Join(c.count.attempts(post.ID), " / ")
			if got := len(up.calls(post.ID)); got > 1 {
				t.Errorf("%s: upstream received it %d times, want at most 1 (%v)", post.ID, got, res)
			}
		})
	}
	wg.Wait()
	kinds := map[string]int{}
	for _, o := range outcomes {
		kinds[addrs.ReplaceAllString(o, "ADDR")]++
	}
	for k, v := range kinds {
		t.Logf("%2d × %s", v, k)
	}
}

// addrs matches the loopback addresses in an error.
var addrs = regexp.MustCompile(`127\.0\.0\.1:\d+`)
