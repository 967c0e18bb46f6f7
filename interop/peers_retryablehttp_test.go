package interop_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// newRetryableClient returns a go-retryablehttp client that sends through
// base, retries at most retryMax times, and logs nothing.
func newRetryableClient(base http.RoundTripper, retryMax int) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.RetryMax = retryMax
	c.Logger = nil
	return c
}

// counting is a RoundTripper that counts the requests it passes to next.
type counting struct {
	next  http.RoundTripper
	calls atomic.Int32
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(req)
}

// TestPeerRetryablehttpRetryAfter plays go-retryablehttp's Retry-After
// table through both clients: a 429 with the header, then a 200. Both
// back off by 1 s on the first retry when the header says nothing they can
// read (go-retryablehttp's RetryWaitMin; the Transport's Base with Rand 1).
// retry.ParseRetryAfter reads every value of the table as
// go-retryablehttp's parser does; two rows added here show the date forms
// only the Transport reads. go-retryablehttp waits a hint instead of its
// backoff, the Transport never less than its backoff.
func TestPeerRetryablehttpRetryAfter(t *testing.T) {
	fixed := func(v ...string) func(time.Time) []string { return func(time.Time) []string { return v } }
	date := func(in time.Duration, layout string) func(time.Time) []string {
		return func(now time.Time) []string { return []string{now.Add(in).UTC().Format(layout)} }
	}
	const ( // the three forms of an HTTP-date (RFC 9110, section 5.6.7)
		imf     = http.TimeFormat
		rfc850  = "Monday, 02-Jan-06 15:04:05 GMT"
		asctime = time.ANSIC
	)
	tests := []struct {
		name   string
		values func(now time.Time) []string // Retry-After's values; nil for none
		hint   time.Duration                // what retry.ParseRetryAfter reads
		ok     bool
		want   time.Duration  // the Transport's wait before its second attempt
		peer   *time.Duration // go-retryablehttp's, when it differs
		differ string
	}{
		{name: "seconds", values: fixed("2"), hint: 2 * time.Second, ok: true, want: 2 * time.Second},
		{name: "date", values: date(2*time.Second, imf), hint: 2 * time.Second, ok: true, want: 2 * time.Second},
		{name: "past-date", values: date(-57*time.Second, imf), hint: 0, ok: true,
			want: time.Second, peer: new(time.Duration(0)), differ: rowHintFloor},
		{name: "nil", values: fixed(), want: time.Second},
		{name: "two-headers", values: fixed("2", "3"), hint: 2 * time.Second, ok: true, want: 2 * time.Second},
		{name: "empty", values: fixed(""), want: time.Second},
		{name: "negative", values: fixed("-2"), want: time.Second},
		{name: "bad-date", values: fixed("Fri, 32 Dec 1999 23:59:59 GMT"), want: time.Second},
		{name: "bad-date-format", values: fixed("badbadbad"), want: time.Second},
		{name: "RFC 850 date", values: date(2*time.Second, rfc850), hint: 2 * time.Second, ok: true,
			want: 2 * time.Second, peer: new(time.Second), differ: rowDateForms},
		{name: "asctime date", values: date(2*time.Second, asctime), hint: 2 * time.Second, ok: true,
			want: 2 * time.Second, peer: new(time.Second), differ: rowDateForms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := retrytest.NewMemoryServer(t)
				play := func() {
					h := http.Header{}
					if v := tc.values(time.Now()); len(v) > 0 {
						h["Retry-After"] = v
					}
					if hint, ok := retry.ParseRetryAfter(h, time.Now()); hint != tc.hint || ok != tc.ok {
						t.Errorf("ParseRetryAfter(%q) = %v, %t; want %v, %t", h["Retry-After"], hint, ok, tc.hint, tc.ok)
					}
					srv.Script(retrytest.Step{Status: http.StatusTooManyRequests, Header: h}, retrytest.Step{})
				}
				call := func(c *http.Client) time.Duration {
					t.Helper()
					before := srv.Requests()
					start := time.Now()
					resp, err := c.Get(srv.URL + "/")
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || srv.Requests()-before != 2 {
						t.Errorf("status %d after %d attempts; want 200 after 2", resp.StatusCode, srv.Requests()-before)
					}
					return time.Since(start)
				}

				play()
				peerClient := newRetryableClient(srv.Client().Transport, 1)
				peer := call(peerClient.StandardClient())

				play()
				rec := new(retries)
				ours := call(&http.Client{Transport: &retry.Transport{Base: srv.Client().Transport, Policy: retry.Policy{
					Base: time.Second, Rand: func() float64 { return 1 }, OnRetry: rec.onRetry,
				}}})

				if ours != tc.want || !cmp.Equal(rec.all(), []time.Duration{tc.want}) {
					t.Errorf("the Transport waited %v (OnRetry: %v); want %v", ours, rec.all(), tc.want)
				}
				wantPeer := tc.want
				if tc.peer != nil {
					wantPeer = *tc.peer
				}
				if peer != wantPeer {
					t.Errorf("go-retryablehttp waited %v; want %v", peer, wantPeer)
				}
				checkPeer(t, tc.differ, peer, ours)
			})
		})
	}
}

// TestPeerRetryablehttpOneAttempt plays the errors that go-retryablehttp's
// default retry policy ends after one attempt: a certificate it does not
// trust, a redirect loop, an unsupported scheme, an invalid header name or
// value. The Transport ends them after one attempt too.
func TestPeerRetryablehttpOneAttempt(t *testing.T) {
	type run struct {
		Calls  int  // requests handed to the base transport
		Failed bool // the caller got an error
	}
	tlsSrv := retrytest.NewTLSServer(t)
	srv := retrytest.NewServer(t, retrytest.Status(http.StatusFound, "Location", "/"))
	tests := []struct {
		name   string
		url    string
		header [2]string // a header to set, name and value
		want   run
	}{
		{name: "a certificate it does not trust", url: tlsSrv.URL, want: run{Calls: 1, Failed: true}},
		{name: "a redirect loop", url: srv.URL, want: run{Calls: 10, Failed: true}},
		{name: "an unsupported scheme", url: strings.Replace(srv.URL, "http", "ftp", 1), want: run{Calls: 1, Failed: true}},
		{name: "an invalid header name", url: srv.URL, header: [2]string{"Header-Name-\033", "header value"}, want: run{Calls: 1, Failed: true}},
		{name: "an invalid header value", url: srv.URL, header: [2]string{"Header-Name", "bad header value \033"}, want: run{Calls: 1, Failed: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newRequest := func() *http.Request {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, tc.url, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.header[0] != "" {
					req.Header.Set(tc.header[0], tc.header[1])
				}
				return req
			}
			do := func(c *http.Client) bool {
				resp, err := c.Do(newRequest())
				if err == nil {
					resp.Body.Close()
				}
				return err != nil
			}

			peerBase := &counting{next: plainTransport()} // trusts no test certificate
			t.Cleanup(peerBase.next.(*http.Transport).CloseIdleConnections)
			pc := newRetryableClient(peerBase, 2)
			pc.RetryWaitMin, pc.RetryWaitMax = time.Millisecond, time.Millisecond // no real wait, should it ever retry these
			peerFailed := do(pc.StandardClient())
			peer := run{Calls: int(peerBase.calls.Load()), Failed: peerFailed}

			oursBase := &counting{next: plainTransport()}
			t.Cleanup(oursBase.next.(*http.Transport).CloseIdleConnections)
			ft := retrytest.NewFakeTime()
			oursFailed := do(&http.Client{Transport: &retry.Transport{Base: oursBase,
				Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}}})
			ours := run{Calls: int(oursBase.calls.Load()), Failed: oursFailed}

			if ours != tc.want || len(ft.Sleeps()) != 0 {
				t.Errorf("through the Transport: %+v after sleeps %v; want %+v and none", ours, ft.Sleeps(), tc.want)
			}
			if peer != tc.want {
				t.Errorf("through go-retryablehttp: %+v; want %+v", peer, tc.want)
			}
			checkPeer(t, "", peer, ours)
		})
	}
}

// opaque is a request body that net/http cannot rewind: it sets no
// GetBody for it.
type opaque struct{ io.Reader }

// TestPeerRetryablehttpRedirectWithBody plays go-retryablehttp's redirect
// of a POST with a body: a 307 to another path, which must receive the
// same body. net/http follows it through the Transport when the body has
// GetBody, and so does go-retryablehttp; for a body without GetBody,
// go-retryablehttp follows it too, having read the body into memory, while
// net/http hands the 307 back.
func TestPeerRetryablehttpRedirectWithBody(t *testing.T) {
	type run struct {
		Status int      // of the response the caller got
		Target []string // the bodies /target received
	}
	srv := retrytest.NewServer(t, retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			w.Header().Set("Location", "/target")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}})
	const payload = `{"foo":"bar"}`
	tests := []struct {
		name   string
		body   func() io.Reader
		want   run
		peer   *run
		differ string
	}{{
		name: "a body with GetBody",
		body: func() io.Reader { return strings.NewReader(payload) },
		want: run{Status: http.StatusCreated, Target: []string{payload}},
	}, {
		name: "no body",
		body: func() io.Reader { return nil },
		want: run{Status: http.StatusCreated, Target: []string{""}},
	}, {
		name:   "a body without GetBody",
		body:   func() io.Reader { return opaque{strings.NewReader(payload)} },
		want:   run{Status: http.StatusTemporaryRedirect},
		peer:   &run{Status: http.StatusCreated, Target: []string{payload}},
		differ: rowRedirectBody,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			targets := func(n int) []string {
				var got []string
				for _, r := range srv.Received()[n:] {
					if r.Path == "/target" {
						got = append(got, string(r.Body))
					}
				}
				return got
			}
			base := freshBase(t, srv)

			n := srv.Requests()
			req, err := retryablehttp.NewRequest(http.MethodPost, srv.URL+"/redirect", tc.body())
			if err != nil {
				t.Fatal(err)
			}
			resp, err := newRetryableClient(base, 1).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			peer := run{Status: resp.StatusCode, Target: targets(n)}

			n = srv.Requests()
			hreq, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/redirect", tc.body())
			if err != nil {
				t.Fatal(err)
			}
			ft := retrytest.NewFakeTime()
			resp, err = (&http.Client{Transport: &retry.Transport{Base: base,
				Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}}}).Do(hreq)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ours := run{Status: resp.StatusCode, Target: targets(n)}

			if diff := cmp.Diff(tc.want, ours, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("through the Transport (-want +got):\n%s", diff)
			}
			wantPeer := tc.want
			if tc.peer != nil {
				wantPeer = *tc.peer
			}
			if diff := cmp.Diff(wantPeer, peer, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("through go-retryablehttp (-want +got):\n%s", diff)
			}
			checkPeer(t, tc.differ, peer, ours)
		})
	}
}
