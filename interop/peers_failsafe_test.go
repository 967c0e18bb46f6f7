package interop_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/timeout"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// executorKey keys a value in the context of a failsafe-go executor.
type executorKey struct{}

// bodyRun is what a caller read of a response.
type bodyRun struct {
	Attempts int    // requests the server received
	Bytes    int    // of the body, read to its end
	Err      string // of the call or the read; "" for none
}

// readWhole sends req through c (or straight to rt when c is nil), reads
// the whole body after the call has returned, and closes it.
func readWhole(t *testing.T, srv *retrytest.Server, rt http.RoundTripper, viaClient bool) bodyRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := srv.Requests()
	var resp *http.Response
	if viaClient {
		resp, err = (&http.Client{Transport: rt}).Do(req)
	} else {
		resp, err = rt.RoundTrip(req)
	}
	run := bodyRun{}
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		run.Bytes = int(n)
	}
	run.Attempts = srv.Requests() - before
	if err != nil {
		run.Err = err.Error()
	}
	return run
}

// TestPeerFailsafeBodyReadable plays failsafe-go's test that a response
// body can still be read after RoundTrip returns, when the contexts the
// retrying transport made for the call and for the attempt are released:
// straight from RoundTrip, through an http.Client, and after a retry.
// Both read the whole body.
func TestPeerFailsafeBodyReadable(t *testing.T) {
	large := strings.Repeat("x", 100000) // large, so that a context released early would cut it
	minutes := failsafe.With(timeout.New[*http.Response](10 * time.Minute)).
		WithContext(context.WithValue(context.Background(), executorKey{}, "bar"))
	tests := []struct {
		name      string
		steps     []retrytest.Step
		viaClient bool
		peer      func(base http.RoundTripper) http.RoundTripper
		want      bodyRun
	}{{
		name:  "from RoundTrip",
		steps: []retrytest.Step{{Body: large}},
		peer: func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripperWithExecutor(base, minutes)
		},
		want: bodyRun{Attempts: 1, Bytes: len(large)},
	}, {
		name:      "through an http.Client",
		steps:     []retrytest.Step{{Body: large}},
		viaClient: true,
		peer: func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripperWithExecutor(base, minutes)
		},
		want: bodyRun{Attempts: 1, Bytes: len(large)},
	}, {
		name:      "after a retry",
		steps:     []retrytest.Step{{Status: http.StatusServiceUnavailable}, {Body: large}},
		viaClient: true,
		peer: func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())
		},
		want: bodyRun{Attempts: 2, Bytes: len(large)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := retrytest.NewServer(t, tc.steps...)
			peer := readWhole(t, srv, tc.peer(freshBase(t, srv)), tc.viaClient)

			srv.Script(tc.steps...)
			ft := retrytest.NewFakeTime()
			ours := readWhole(t, srv, &retry.Transport{Base: freshBase(t, srv),
				Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}}, tc.viaClient)

			if ours != tc.want || peer != tc.want {
				t.Errorf("read %+v through the Transport, %+v through failsafe-go; want %+v", ours, peer, tc.want)
			}
			checkPeer(t, "", peer, ours)
		})
	}
}

// TestPeerFailsafeSlowBody extends failsafe-go's test to a body that takes
// longer to arrive than the attempt's time limit (failsafe-go's timeout
// policy, the Transport's AttemptTimeout): both limit the wait for the
// response, not the reading of its body. It runs in a testing/synctest
// bubble, against an in-memory server that sends the body in 32 KiB
// pieces a second apart.
func TestPeerFailsafeSlowBody(t *testing.T) {
	const limit = 100 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		step := retrytest.Step{BodySize: 100000, Dribble: time.Second}
		srv := retrytest.NewMemoryServer(t, step)
		start := time.Now()
		peer := readWhole(t, srv, failsafehttp.NewRoundTripper(freshBase(t, srv), timeout.New[*http.Response](limit)), true)
		took := time.Since(start)

		srv.Script(step)
		ours := readWhole(t, srv, &retry.Transport{Base: freshBase(t, srv), Policy: retry.Policy{AttemptTimeout: limit}}, true)

		if want := (bodyRun{Attempts: 1, Bytes: 100000}); ours != want || peer != want {
			t.Errorf("read %+v through the Transport, %+v through failsafe-go; want %+v", ours, peer, want)
		}
		if took < 3*time.Second {
			t.Errorf("the body arrived in %v; want the server's pace, 3 s at least", took)
		}
		checkPeer(t, "", peer, ours)
	})
}
