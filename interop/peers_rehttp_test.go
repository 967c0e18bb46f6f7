package interop_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/google/go-cmp/cmp"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// timeoutRun is what a caller saw of a GET that met a timeout: what came
// back, and what a caller tests to tell that it was a timeout. The
// concrete error types are not compared: under http.Client.Timeout,
// net/http returns context.DeadlineExceeded for its own Transport and its
// timeoutError for any other RoundTripper, rehttp's and retry's alike.
type timeoutRun struct {
	Calls    int           // requests the server received
	Took     time.Duration // until the error, or the end of the body; bubble time
	Status   int           // of the response, when one came back whole; 0 otherwise
	URLError bool          // the error is a *url.Error
	Timeout  bool          // the error asserted to net.Error says Timeout, as callers test it
	Deadline bool          // errors.Is(err, context.DeadlineExceeded)
}

// TestPeerRehttpTimeoutErrors plays rehttp's timeout tests: under
// http.Client.Timeout, the error a caller gets through a retrying transport
// must answer the caller's tests as a plain http.Transport's does (a
// *url.Error, a net.Error whose Timeout is true, context.DeadlineExceeded),
// so that code which tests for a timeout keeps working. Each case runs a
// plain transport, rehttp and the Transport, in a testing/synctest bubble
// against an in-memory server.
func TestPeerRehttpTimeoutErrors(t *testing.T) {
	const second = time.Second
	tests := []struct {
		name          string
		steps         []retrytest.Step
		clientTimeout time.Duration // http.Client.Timeout
		headerTimeout time.Duration // the base's ResponseHeaderTimeout
		rehttp        func(base http.RoundTripper) http.RoundTripper
		policy        retry.Policy
		plain         *timeoutRun // nil: the plain transport is not compared
		want          timeoutRun
		peer          *timeoutRun // rehttp, when it differs
		differ        string
	}{{
		name:          "a server that never answers",
		steps:         []retrytest.Step{{Hang: true}},
		clientTimeout: second,
		rehttp: func(base http.RoundTripper) http.RoundTripper {
			return rehttp.NewTransport(base, rehttp.RetryAll(rehttp.RetryMaxRetries(2), rehttp.RetryTemporaryErr()), rehttp.ConstDelay(second))
		},
		plain: &timeoutRun{Calls: 1, Took: second, URLError: true, Timeout: true, Deadline: true},
		want:  timeoutRun{Calls: 1, Took: second, URLError: true, Timeout: true, Deadline: true},
	}, {
		name:          "a slow body",
		steps:         []retrytest.Step{{Body: "/testing", Stall: true}},
		clientTimeout: second,
		rehttp: func(base http.RoundTripper) http.RoundTripper {
			return rehttp.NewTransport(base, rehttp.RetryAll(rehttp.RetryMaxRetries(2), rehttp.RetryTemporaryErr()), rehttp.ConstDelay(second))
		},
		plain: &timeoutRun{Calls: 1, Took: second, Timeout: true, Deadline: true},
		want:  timeoutRun{Calls: 1, Took: second, Timeout: true, Deadline: true},
	}, {
		name:          "a retry that never answers",
		steps:         []retrytest.Step{{Status: http.StatusInternalServerError}, {Hang: true}},
		clientTimeout: second,
		rehttp: func(base http.RoundTripper) http.RoundTripper {
			return rehttp.NewTransport(base, rehttp.RetryAll(rehttp.RetryMaxRetries(1), rehttp.RetryStatusInterval(500, 600)), rehttp.ConstDelay(0))
		},
		policy: retry.Policy{Rand: func() float64 { return 0 }}, // no delay, as rehttp's
		want:   timeoutRun{Calls: 2, Took: second, URLError: true, Timeout: true, Deadline: true},
	}, {
		name:          "a delay longer than the time left",
		steps:         []retrytest.Step{{Status: http.StatusInternalServerError}, {Hang: true}},
		clientTimeout: second,
		rehttp: func(base http.RoundTripper) http.RoundTripper {
			return rehttp.NewTransport(base, rehttp.RetryAll(rehttp.RetryMaxRetries(1), rehttp.RetryStatusInterval(500, 600)), rehttp.ConstDelay(2*second))
		},
		policy: retry.Policy{Base: 2 * second, Rand: func() float64 { return 1 }}, // a delay of 2 s, as rehttp's
		want:   timeoutRun{Calls: 1, Status: http.StatusInternalServerError},      // at once
		peer:   &timeoutRun{Calls: 1, Took: second, URLError: true, Timeout: true, Deadline: true},
		differ: rowCallerDeadline,
	}, {
		// No http.Client.Timeout: the base transport's ResponseHeaderTimeout
		// times out each attempt, and both retry it once.
		name:          "the base's header timeout, retried",
		steps:         []retrytest.Step{{Hang: true}},
		headerTimeout: second,
		rehttp: func(base http.RoundTripper) http.RoundTripper {
			return rehttp.NewTransport(base, rehttp.RetryAll(rehttp.RetryMaxRetries(1), rehttp.RetryTemporaryErr()), rehttp.ConstDelay(second))
		},
		policy: retry.Policy{MaxAttempts: 2, Base: second, Rand: func() float64 { return 1 }},
		plain:  &timeoutRun{Calls: 1, Took: second, URLError: true, Timeout: true, Deadline: true},
		want:   timeoutRun{Calls: 2, Took: 3 * second, URLError: true, Timeout: true, Deadline: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := retrytest.NewMemoryServer(t)
				get := func(wrap func(http.RoundTripper) http.RoundTripper) (run timeoutRun, err error) {
					t.Helper()
					srv.Script(tc.steps...)
					base := srv.Client().Transport.(*http.Transport).Clone()
					base.ResponseHeaderTimeout = tc.headerTimeout
					defer base.CloseIdleConnections()
					c := &http.Client{Transport: wrap(base), Timeout: tc.clientTimeout}
					before := srv.Requests()
					start := time.Now()
					resp, err := c.Get(srv.URL + "/testing")
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if err == nil {
							run.Status = resp.StatusCode
						}
					}
					run.Calls, run.Took = srv.Requests()-before, time.Since(start)
					if err != nil {
						// Type assertions, not errors.As: what net/http returns, tested
						// as callers test it.
						_, run.URLError = err.(*url.Error)
						ne, ok := err.(net.Error)
						run.Timeout = ok && ne.Timeout()
						run.Deadline = errors.Is(err, context.DeadlineExceeded)
					}
					return run, err
				}

				plain, _ := get(func(base http.RoundTripper) http.RoundTripper { return base })
				peer, peerErr := get(tc.rehttp)
				if peer.URLError && !peer.Timeout && !peer.Deadline && strings.Contains(peerErr.Error(), "net/http: request canceled") {
					// When the client's timer and the request's context end at
					// once, rehttp may report net/http's plain "request canceled"
					// instead: its own timeout tests accept that error beside a
					// timeout, so it counts as one here.
					t.Logf("rehttp: %v", peerErr)
					peer.Timeout, peer.Deadline = true, true
				}
				ours, oursErr := get(func(base http.RoundTripper) http.RoundTripper {
					return &retry.Transport{Base: base, Policy: tc.policy}
				})

				comparePeer(t, "rehttp", tc.want, tc.peer, tc.differ, peer, ours)
				if tc.plain != nil {
					if diff := cmp.Diff(*tc.plain, plain); diff != "" {
						t.Errorf("through a plain transport (-want +got):\n%s", diff)
					}
				}
				if tc.headerTimeout > 0 {
					// What a caller finds besides: the *retry.Error, and the timeout it wraps.
					if e, ok := errors.AsType[*retry.Error](oursErr); !ok || e.Attempts != 2 || e.Reason != retry.ReasonMaxAttempts {
						t.Errorf("the Transport's error %v: want a *retry.Error after 2 attempts (max_attempts)", oursErr)
					}
				}
			})
		})
	}
}
