package proxies_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
)

// TestUpstreamDownThenBack: the upstream refuses connections, so the proxy
// answers 502 (nginx) or 503 (haproxy); it comes back when the Transport
// retries. What may run twice is retried and reaches the upstream once; a
// POST without a key is never re-sent, since a proxy's 502 or 503 does not
// prove the request went nowhere.
func TestUpstreamDownThenBack(t *testing.T) {
	t.Parallel()
	// A body the socket buffers take whole: haproxy answers 503 as soon
	// as the connect fails, without reading the body, and a client still
	// writing a larger one may get EPIPE instead of the 503
	// (golang/go#11745; TestEarly413 shows it).
	body := payload(4<<10, 1)
	for _, f := range fronts() {
		tests := []struct {
			name         string
			call         call
			wantAttempts []string // each attempt's status, as the counter saw it
			wantStatus   int
			wantUpstream []record
		}{
			{
				name:         "GET recovers",
				call:         call{Method: http.MethodGet, ID: "get"},
				wantAttempts: []string{strconv.Itoa(f.refused), "200"},
				wantStatus:   http.StatusOK,
				wantUpstream: []record{{Method: http.MethodGet, CallID: "get", BodySHA: bodySum(nil), Complete: true}},
			},
			{
				name:         "keyless POST sent once",
				call:         call{Method: http.MethodPost, ID: "post", Body: body},
				wantAttempts: []string{strconv.Itoa(f.refused)},
				wantStatus:   f.refused,
				wantUpstream: nil,
			},
			{
				name:         "keyed POST re-sent whole",
				call:         call{Method: http.MethodPost, ID: "keyed", Body: body, Key: "key-1"},
				wantAttempts: []string{strconv.Itoa(f.refused), "200"},
				wantStatus:   http.StatusOK,
				wantUpstream: []record{{
					Method: http.MethodPost, CallID: "keyed", ContentLength: int64(len(body)),
					BodyLen: int64(len(body)), BodySHA: bodySum(body), Complete: true,
				}},
			},
		}
		for _, tc := range tests {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				up := newUpstream(t)
				up.down()
				url := f.start(t, up.addr, 0)
				var once sync.Once
				c := newClient(t, plainTransport(), clientOpts{
					OnRetry: func(retry.Event) { once.Do(up.back) },
				})
				res := c.send(tc.call.request(t, context.Background(), url))
				if res.Err != nil || res.Status != tc.wantStatus {
					t.Errorf("caller got %v, want status %d", res, tc.wantStatus)
				}
				if diff := cmp.Diff(tc.wantAttempts, c.count.attempts(tc.call.ID)); diff != "" {
					t.Errorf("attempts (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantUpstream, up.calls(tc.call.ID)); diff != "" {
					t.Errorf("upstream requests (-want +got):\n%s", diff)
				}
			})
		}
	}
}
