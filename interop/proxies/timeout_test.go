package proxies_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// proxyTimeout is the proxy's wait for the upstream's answer in
// TestProxyTimeout, and upstreamWork the upstream's time to answer.
const (
	proxyTimeout = 200 * time.Millisecond
	upstreamWork = time.Second
)

// TestProxyTimeout: the proxy gives up on a slow upstream before it
// answers (nginx proxy_read_timeout, haproxy timeout server) and answers
// 504, though the upstream got the request and goes on with it. A POST
// without a key reaches the upstream once and the caller gets the 504; a
// GET is retried until MaxAttempts, each attempt reaching the upstream.
func TestProxyTimeout(t *testing.T) {
	t.Parallel()
	body := payload(4<<10, 2)
	for _, f := range fronts() {
		tests := []struct {
			name string
			call call
			want int // attempts, and requests the upstream receives
		}{
			{name: "keyless POST once", call: call{Method: http.MethodPost, ID: "post", Body: body}, want: 1},
			{name: "GET retried", call: call{Method: http.MethodGet, ID: "get"}, want: maxAttempts},
		}
		for _, tc := range tests {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				up := newUpstream(t)
				up.script = func(string, int) reply { return reply{Delay: upstreamWork} }
				url := f.start(t, up.addr, proxyTimeout)
				c := newClient(t, plainTransport(), clientOpts{})
				res := c.send(tc.call.request(t, context.Background(), url))
				if res.Err != nil || res.Status != http.StatusGatewayTimeout {
					t.Errorf("caller got %v, want status 504", res)
				}
				want := make([]string, tc.want)
				for i := range want {
					want[i] = "504"
				}
				if diff := cmp.Diff(want, c.count.attempts(tc.call.ID)); diff != "" {
					t.Errorf("attempts (-want +got):\n%s", diff)
				}
				if got := len(up.calls(tc.call.ID)); got != tc.want {
					t.Errorf("upstream received %d requests, want %d", got, tc.want)
				}
			})
		}
	}
}
