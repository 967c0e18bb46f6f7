package proxies_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// uploadSize is the body of the upload tests: 5 MiB, far more than the
// socket buffers hold, so the client is still writing when the proxy
// answers or the connection is cut.
const uploadSize = 5 << 20

// TestEarly413: the proxy refuses a 5 MiB upload at its headers
// (Content-Length above 1 MiB) while the client is still writing the body.
// The upstream never sees it. A 413 is final: it is never retried, so it
// can only be the last attempt. net/http reports a write error instead of
// the early answer when the write fails first (golang/go#11745): haproxy
// closes at once, and the client's write fails with EPIPE or ECONNRESET.
// The Transport sends a keyed upload again after such an error, and a
// keyless one never; how often each was sent, and what the caller got, is
// logged.
func TestEarly413(t *testing.T) {
	t.Parallel()
	proxies := []struct {
		name  string
		start func(t *testing.T, upstream string) string
	}{
		{
			name: "nginx client_max_body_size",
			start: func(t *testing.T, upstream string) string {
				return startNginx(t, nginxOpts{Upstreams: []string{upstream}, HTTP: "client_max_body_size 1m;"}).url
			},
		},
		{
			name: "haproxy http-request deny",
			start: func(t *testing.T, upstream string) string {
				return startHAProxy(t, haproxyOpts{
					Servers:  []string{upstream},
					Frontend: "http-request deny deny_status 413 if { req.hdr_val(content-length) gt 1048576 }",
				}).url
			},
		},
	}
	body := payload(uploadSize, 5)
	uploads := []struct {
		name  string
		call  call
		once  bool // may be sent only once
		clean bool // must get the 413, sent once: the body waits for the proxy's word
	}{
		{name: "keyed POST", call: call{Method: http.MethodPost, ID: "keyed", Body: body, Key: "key-5"}},
		{name: "keyless POST", call: call{Method: http.MethodPost, ID: "keyless", Body: body}, once: true},
		{name: "keyed POST, Expect: 100-continue", call: call{Method: http.MethodPost, ID: "expect", Body: body, Key: "key-6", Expect: true}, clean: true},
	}
	for _, p := range proxies {
		for _, u := range uploads {
			t.Run(p.name+"/"+u.name, func(t *testing.T) {
				t.Parallel()
				up := newUpstream(t)
				url := p.start(t, up.addr)
				c := newClient(t, plainTransport(), clientOpts{})
				res := c.send(u.call.request(t, context.Background(), url))
				attempts := c.count.attempts(u.call.ID)
				t.Logf("%s, %s: caller got %v; sent %d times: %q", p.name, u.name, res, len(attempts), attempts)
				if got := up.count(); got != 0 {
					t.Errorf("upstream received %d requests, want 0", got)
				}
				if res.Err == nil && res.Status != http.StatusRequestEntityTooLarge {
					t.Errorf("caller got %v, want status 413 or an error", res)
				}
				for i, a := range attempts {
					if a == "413" && i != len(attempts)-1 {
						t.Errorf("attempt %d of %d got a 413 and was retried", i+1, len(attempts))
					}
				}
				if u.clean && (res.Status != http.StatusRequestEntityTooLarge || len(attempts) != 1) {
					t.Errorf("caller got %v after %d attempts, want the 413 after 1", res, len(attempts))
				}
				if u.once && len(attempts) != 1 {
					t.Errorf("a keyless POST sent %d times, want 1", len(attempts))
				}
			})
		}
	}
}

// TestResetMidUpload: a TCP proxy in front of nginx resets the client's
// connection 1 MiB into a keyed 5 MiB PUT. The Transport sends it again,
// whole, on a new connection; nginx buffers request bodies, so the
// upstream receives only the complete one, with the body and
// Content-Length the caller sent.
func TestResetMidUpload(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	n := startNginx(t, nginxOpts{Upstreams: []string{up.addr}, HTTP: "client_max_body_size 16m;"})
	cut := newCutter(t, n.url[len("http://"):len(n.url)-1], 1<<20)
	c := newClient(t, plainTransport(), clientOpts{})
	body := payload(uploadSize, 6)
	upload := call{Method: http.MethodPut, ID: "put", Body: body, Key: "key-6"}
	res := c.send(upload.request(t, context.Background(), "http://"+cut.addr()+"/"))
	attempts := c.count.attempts(upload.ID)
	t.Logf("caller got %v; attempts %q", res, attempts)
	if res.Err != nil || res.Status != http.StatusOK {
		t.Errorf("caller got %v, want status 200", res)
	}
	if len(attempts) != 2 {
		t.Errorf("%d attempts (%q), want 2: the cut one and its retry", len(attempts), attempts)
	}
	if got := cut.conns.Load(); got != 2 {
		t.Errorf("%d connections through the cutter, want 2", got)
	}
	want := []record{{
		Method: http.MethodPut, CallID: upload.ID, ContentLength: uploadSize,
		BodyLen: uploadSize, BodySHA: bodySum(body), Complete: true,
	}}
	if diff := cmp.Diff(want, up.calls(upload.ID)); diff != "" {
		t.Errorf("upstream requests (-want +got):\n%s", diff)
	}
}
