package interop_test

import (
	"net/http/httptrace"
	"sync/atomic"
	"testing"
	"time"
)

// TestNetHTTPResendsOnItsOwn shows why a server can count more sends than
// the Transport made: when a reused keep-alive connection drops before any
// response byte, net/http's own transport sends an idempotent (or keyed)
// request again on a new connection, without the Transport above it
// knowing. With MaxAttempts 1 the Transport makes one attempt, reports no
// retry, and the server still sees the request twice.
func TestNetHTTPResendsOnItsOwn(t *testing.T) {
	t.Parallel()
	e := newGitHubEnv(t, overHTTP, nil, func(time.Time) []fault {
		return []fault{{}, {ResetBefore: true}} // the first call warms the connection
	})
	e.r.Policy.MaxAttempts = 1
	if err := e.call(t, "GET"); err != nil {
		t.Fatalf("first call: %v", err)
	}

	var reused atomic.Bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			if i.Reused {
				reused.Store(true)
			}
		},
	})
	repo, _, err := e.client.Repositories.Get(ctx, "octo", "hello")
	if !reused.Load() {
		t.Skip("net/http did not reuse the first call's connection; nothing to show")
	}
	if err != nil {
		t.Fatalf("second call: %v; net/http did not send it again", err)
	}
	if repo.GetFullName() != "octo/hello" {
		t.Errorf("got repository %q, want octo/hello", repo.GetFullName())
	}
	if diff := faults(e.proxy.Received()); len(diff) != 3 || diff[1] != "reset before" {
		t.Errorf("server saw %v, want forward, reset before, forward", diff)
	}
	if n := e.r.retries(); n != 0 {
		t.Errorf("OnRetry called %d times, want 0: the re-send was net/http's", n)
	}
}
