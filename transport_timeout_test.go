package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry/retrytest"
)

func TestTransportDrainStopsAtAttemptTimeout(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Status: 503, Body: "partial", Stall: true}, retrytest.Step{Body: "ok"})
	c, _ := newClient(t, Policy{AttemptTimeout: 50 * time.Millisecond})
	start := time.Now()
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	wantUnread(t, resp, "ok")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v; the stalled body held the retry up", d)
	}
}

// slowBody sends the headers at once, then ten lines of body 30 ms apart.
func slowBody(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	for i := range 10 {
		select {
		case <-time.After(30 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "line %d\n", i)
		_ = rc.Flush()
	}
}

func TestTransportAttemptTimeoutEndsAtHeaders(t *testing.T) {
	t.Parallel()
	t.Run("body outlives the timeout", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewServer(t, retrytest.Step{Func: slowBody})
		c, _ := newClient(t, Policy{AttemptTimeout: 50 * time.Millisecond})
		start := time.Now()
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		for i := range 10 {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		wantUnread(t, resp, want.String())
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Errorf("body read in %v; the server should take about 300ms", d)
		}
	})
	t.Run("hang before headers is cut and retried", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewServer(t, retrytest.Step{Hang: true}, retrytest.Step{Body: "ok"})
		c, _ := newClient(t, Policy{AttemptTimeout: 50 * time.Millisecond})
		start := time.Now()
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		wantUnread(t, resp, "ok")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v, want about the 50ms attempt timeout", d)
		}
		if n := srv.Requests(); n != 2 {
			t.Errorf("server got %d requests, want 2", n)
		}
	})
}

func TestTransportReleasesAttemptContextWithBody(t *testing.T) {
	tests := []struct {
		name   string
		method string
		finish func(io.ReadCloser) // what the caller does; nil: nothing
	}{
		{name: "closed unread", method: "GET", finish: func(b io.ReadCloser) { b.Close() }},
		{name: "read to EOF", method: "GET", finish: func(b io.ReadCloser) { _, _ = io.ReadAll(b) }},
		{name: "no body", method: "HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, retrytest.Step{Body: "ok"})
			var actx context.Context
			base := newBase(t)
			tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				actx = req.Context()
				return base.RoundTrip(req)
			}), Policy{})
			resp, err := tr.RoundTrip(newRequest(t, tt.method, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if tt.finish != nil {
				if err := actx.Err(); err != nil {
					t.Fatalf("attempt context done before the body was finished: %v", err)
				}
				tt.finish(resp.Body)
			}
			if actx.Err() == nil {
				t.Error("attempt context still alive after the body was finished")
			}
		})
	}
}

// upgradeConn is a 101 response body: the connection both ways.
func TestTransportSleepsForRetryAfter(t *testing.T) {
	pairs := func(kv ...string) func(time.Time) []string {
		return func(time.Time) []string { return kv }
	}
	tests := []struct {
		name   string
		header func(now time.Time) []string // the hint, given the fake clock's time
		want   time.Duration
	}{
		{name: "delta-seconds", header: pairs("Retry-After", "7"), want: 7 * time.Second},
		{name: "HTTP-date", want: 9 * time.Second, header: func(now time.Time) []string {
			return []string{"Retry-After", now.Add(9 * time.Second).Format(http.TimeFormat)}
		}},
		{name: "retry-after-ms", header: pairs("Retry-After-Ms", "1500"), want: 1500 * time.Millisecond},
		{name: "retry-after-ms wins", header: pairs("Retry-After-Ms", "250", "Retry-After", "7"),
			want: 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Base 1ms: the backoff is far below every hint.
			c, ft := newClient(t, Policy{Base: time.Millisecond})
			srv := retrytest.NewServer(t, retrytest.Status(503, tt.header(ft.Clock.Now())...), retrytest.Step{Body: "ok"})
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			wantUnread(t, resp, "ok")
			if diff := cmp.Diff([]time.Duration{tt.want}, ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransportStopsWhenCallerCancels(t *testing.T) {
	t.Parallel()
	t.Run("during a sleep", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewServer(t, retrytest.Status(503))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p, ft := fakeTime(Policy{})
		p.Sleep = func(sctx context.Context, d time.Duration) error {
			cancel()
			return ft.Sleep(sctx, d)
		}
		checkCancelled(t, srv, NewTransport(newBase(t), p), ctx)
	})
	t.Run("during an attempt", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewServer(t, retrytest.Step{Hang: true}, retrytest.Step{Body: "ok"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(20*time.Millisecond, cancel)
		p, _ := fakeTime(Policy{})
		checkCancelled(t, srv, NewTransport(newBase(t), p), ctx)
	})
}

// checkCancelled sends a request under ctx, which is cancelled during the
// call, and checks that the call returned promptly after one request.
func checkCancelled(t *testing.T, srv *retrytest.Server, tr *Transport, ctx context.Context) {
	t.Helper()
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(newRequest(t, "GET", srv.URL, nil).WithContext(ctx))
	if resp != nil {
		resp.Body.Close()
		t.Errorf("got status %d, want an error", resp.StatusCode)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v, want promptly", d)
	}
	if n := srv.Requests(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}
