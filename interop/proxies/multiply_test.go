package proxies_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// multiplyCase is a proxy that retries on its own, in front of servers that
// all fail.
type multiplyCase struct {
	name string
	// servers is how many failing upstreams to start, all answering
	// status; down adds one that refuses connections, first in the list.
	servers int
	down    bool
	status  int
	// start runs the proxy in front of the servers' addresses and returns
	// its URL and a function returning its log.
	start func(t *testing.T, addrs []string) (string, func() string)
	// wantGET and wantPOST are the requests the servers receive for a GET
	// call and for a keyless POST call, at least and at most.
	wantGET, wantPOST [2]int
}

// multiplyCases are the proxy retry settings TestProxyRetriesMultiply
// measures, with the counts Debian's nginx 1.22.1 and haproxy 2.6.12 give.
func multiplyCases() []multiplyCase {
	return []multiplyCase{
		{
			// nginx's passive health check leaves a failed server out
			// for fail_timeout (10s): after the first attempt or two,
			// depending on which server round-robin picks first, nginx
			// answers 502 "no live upstreams" without sending.
			name: "nginx http_502, one down, max_fails=1", servers: 1, down: true, status: 502,
			start:   nginxNext("error timeout http_502", ""),
			wantGET: [2]int{1, 2}, wantPOST: [2]int{0, 1},
		},
		{
			name: "nginx http_502, one down, max_fails=0", servers: 1, down: true, status: 502,
			start:   nginxNext("error timeout http_502", "max_fails=0"),
			wantGET: exactly(maxAttempts), wantPOST: exactly(1),
		},
		{
			name: "nginx http_502 non_idempotent, one down, max_fails=0", servers: 1, down: true, status: 502,
			start:   nginxNext("error timeout http_502 non_idempotent", "max_fails=0"),
			wantGET: exactly(maxAttempts), wantPOST: exactly(1),
		},
		{
			// Without non_idempotent, nginx passes a POST on only when
			// it was not sent: a refused connect, never a 502.
			name: "nginx http_502, two 502, max_fails=0", servers: 2, status: 502,
			start:   nginxNext("error timeout http_502", "max_fails=0"),
			wantGET: exactly(2 * maxAttempts), wantPOST: exactly(1),
		},
		{
			name: "nginx http_502 non_idempotent, two 502, max_fails=0", servers: 2, status: 502,
			start:   nginxNext("error timeout http_502 non_idempotent", "max_fails=0"),
			wantGET: exactly(2 * maxAttempts), wantPOST: exactly(2),
		},
		{
			// retry-on re-sends any method, a keyless POST included.
			name: "haproxy retry-on 503 retries 3", servers: 1, status: 503,
			start: func(t *testing.T, addrs []string) (string, func() string) {
				h := startHAProxy(t, haproxyOpts{Servers: addrs, Backend: "retries 3\n  retry-on 503"})
				return h.url, func() string { return grepLines(h.output(), "be/") }
			},
			wantGET: exactly(4 * maxAttempts), wantPOST: exactly(4),
		},
	}
}

// TestProxyRetriesMultiply measures what a proxy's own retries add to the
// Transport's: how many requests reach the upstream servers for one call
// when every server fails, with nginx's proxy_next_upstream over two
// servers and haproxy's retry-on. The Transport makes maxAttempts attempts
// of a GET and one of a keyless POST; the proxy multiplies them.
func TestProxyRetriesMultiply(t *testing.T) {
	t.Parallel()
	for _, tc := range multiplyCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ups []*upstream
			var addrs []string
			if tc.down {
				addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(freePorts(t, 1)[0]))
			}
			for range tc.servers {
				up := newUpstream(t)
				up.script = func(string, int) reply { return reply{Status: tc.status} }
				ups = append(ups, up)
				addrs = append(addrs, up.addr)
			}
			url, proxyLog := tc.start(t, addrs)
			c := newClient(t, plainTransport(), clientOpts{})
			calls := []struct {
				call
				want     [2]int
				attempts int
			}{
				{call: call{Method: http.MethodGet, ID: "get"}, want: tc.wantGET, attempts: maxAttempts},
				{call: call{Method: http.MethodPost, ID: "keyless", Body: payload(1<<10, 7)}, want: tc.wantPOST, attempts: 1},
			}
			for _, cl := range calls {
				res := c.send(cl.request(t, context.Background(), url))
				got := 0
				for _, up := range ups {
					got += len(up.calls(cl.ID))
				}
				attempts := len(c.count.attempts(cl.ID))
				t.Logf("%s: caller got %v after %d attempts; the servers received %d requests",
					cl.Method, res, attempts, got)
				if attempts != cl.attempts {
					t.Errorf("%s: %d attempts, want %d", cl.Method, attempts, cl.attempts)
				}
				if got < cl.want[0] || got > cl.want[1] {
					t.Errorf("%s: the servers received %d requests, want %s", cl.Method, got, span(cl.want))
				}
			}
			t.Logf("proxy log:\n%s", proxyLog())
		})
	}
}

// nginxNext returns a start function for nginx with proxy_next_upstream
// set to next and params after each server.
func nginxNext(next, params string) func(t *testing.T, addrs []string) (string, func() string) {
	return func(t *testing.T, addrs []string) (string, func() string) {
		n := startNginx(t, nginxOpts{
			Upstreams:    addrs,
			ServerParams: params,
			Location:     "proxy_next_upstream " + next + ";",
		})
		return n.url, func() string { return strings.TrimSpace(n.accessLog()) }
	}
}

// exactly is a count range of one value.
func exactly(n int) [2]int { return [2]int{n, n} }

// span formats a count range.
func span(r [2]int) string {
	if r[0] == r[1] {
		return strconv.Itoa(r[0])
	}
	return strconv.Itoa(r[0]) + " to " + strconv.Itoa(r[1])
}
