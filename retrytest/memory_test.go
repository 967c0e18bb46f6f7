package retrytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// TestHangingServerInSynctest is the test docs/testing.md shows: two
// attempts against a server that never answers, each cut by the default
// 10 s attempt timeout, in a synctest bubble where those 20 s are virtual.
func TestHangingServerInSynctest(t *testing.T) {
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		srv := retrytest.NewMemoryServer(t, retrytest.Step{Hang: true})
		client := &http.Client{Transport: &retry.Transport{
			Base:   srv.Client().Transport, // dials the server in memory
			Policy: retry.Policy{MaxAttempts: 2},
		}}

		began := time.Now() // the bubble's clock
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got %s, want an error", resp.Status)
		}
		var rerr *retry.Error
		if !errors.As(err, &rerr) || rerr.Reason != retry.ReasonMaxAttempts || rerr.Attempts != 2 {
			t.Fatalf("err = %v, want a *retry.Error after 2 attempts", err)
		}
		if got := srv.Requests(); got != 2 {
			t.Errorf("server saw %d requests, want 2", got)
		}
		// Two attempt timeouts and one backoff sleep of at most 500 ms.
		if d := time.Since(began); d < 20*time.Second || d > 21*time.Second {
			t.Errorf("the call took %v of virtual time, want 20 s to 21 s", d)
		}
	})
	if d := time.Since(start); d > time.Second {
		t.Errorf("the test took %v of real time, want under 1 s", d)
	}
}

// TestStalledBodyInSynctest: a body that stops halfway is cut by the
// Transport's BodyIdleTimeout after 30 s of virtual time.
func TestStalledBodyInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := retrytest.NewMemoryServer(t, retrytest.Step{Body: "partial", Stall: true})
		client := &http.Client{Transport: &retry.Transport{
			Base:            srv.Client().Transport,
			BodyIdleTimeout: 30 * time.Second,
		}}
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		began := time.Now()
		body, err := io.ReadAll(resp.Body)
		if string(body) != "partial" || !errors.Is(err, retry.ErrBodyIdle) {
			t.Errorf("body %q, err %v; want \"partial\" and retry.ErrBodyIdle", body, err)
		}
		if d := time.Since(began); d < 30*time.Second || d > 31*time.Second {
			t.Errorf("the read took %v of virtual time, want 30 s", d)
		}
	})
}

// TestMemoryServerPlaysSteps runs the same kinds of script as the loopback
// server, inside a bubble: every answer, a stall cut by the client, a delay
// that passes in virtual time, and connections counted.
func TestMemoryServerPlaysSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := retrytest.NewMemoryServer(t,
			retrytest.Status(http.StatusServiceUnavailable, "Retry-After", "1"),
			retrytest.Step{Body: "late", Delay: 3 * time.Second},
			retrytest.Step{Body: "partial", Stall: true},
			retrytest.Step{Body: "bye", Close: true},
			retrytest.Step{Body: "fresh"},
		)
		var got []answer
		for range 5 {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			got = append(got, get(t, srv, ctx))
			cancel()
		}
		want := []answer{
			{Status: 503, Body: ""},
			{Status: 200, Body: "late"},
			{Status: 200, Body: "partial", Err: "error"},
			{Status: 200, Body: "bye"},
			{Status: 200, Body: "fresh"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(5, srv.Requests()); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		// The stalled body was abandoned, and Close asked for a new one.
		if got := srv.Conns(); got < 2 {
			t.Errorf("connections = %d, want at least 2", got)
		}
	})
}

// TestMemoryServerReset shows how a reset looks in memory: the connection
// ends, before the headers or in the body.
func TestMemoryServerReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := retrytest.NewMemoryServer(t,
			retrytest.Step{Reset: true},
			retrytest.Step{Body: "abc", ResetAfter: 2},
		)
		c := srv.Client()
		if resp, err := c.Get(srv.URL); err == nil {
			resp.Body.Close()
			t.Fatalf("Reset: got %s, want an error", resp.Status)
		}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatalf("ResetAfter: %v", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if string(body) != "ab" || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("ResetAfter: body %q, err %v; want \"ab\" and io.ErrUnexpectedEOF", body, err)
		}
	})
}
