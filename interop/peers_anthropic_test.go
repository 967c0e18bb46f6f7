package interop_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/retrykit/retry/retrytest"
)

// newAnthropic returns an anthropic-sdk-go client for the server at
// baseURL, sending through c with the given number of retries of its own.
func newAnthropic(c *http.Client, baseURL string, retries int, more ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey("sk-ant-test"),
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(c),
		option.WithMaxRetries(retries),
	}, more...)...)
}

// createBatch creates a message batch: a POST to /v1/messages/batches,
// which anthropic-sdk-go sends with its conservative retries, and which
// the recipe's Replayable does not allow (a repeat creates a second batch).
func createBatch(ctx context.Context, c anthropic.Client, opts ...option.RequestOption) error {
	_, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
		Requests: []anthropic.MessageBatchNewParamsRequest{{
			CustomID: "first",
			Params: anthropic.MessageBatchNewParamsRequestParams{
				MaxTokens: 1024,
				Model:     "claude-test",
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
			},
		}},
	}, opts...)
	return err
}

// anthropicStatus returns the status of err's *anthropic.Error, or 0.
func anthropicStatus(err error) int {
	if apiErr, ok := errors.AsType[*anthropic.Error](err); ok {
		return apiErr.StatusCode
	}
	return 0
}

// peerServer starts a retrytest server that serves pr: plain HTTP/1.1,
// or HTTP/2 over TLS.
func peerServer(t *testing.T, pr proto) *retrytest.Server {
	if pr == overH2 {
		return retrytest.NewTLSServer(t)
	}
	return retrytest.NewServer(t)
}

// freshBase returns a new transport to srv, with a pool of its own.
func freshBase(t *testing.T, srv *retrytest.Server) *http.Transport {
	base := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// sent returns the requests srv received from the n-th on, checking that
// each came over pr and that all carry the same body.
func sent(t *testing.T, srv *retrytest.Server, n int, pr proto) []retrytest.Request {
	t.Helper()
	got := srv.Received()[n:]
	for i, r := range got {
		if r.Proto != pr.wire() {
			t.Errorf("request %d came over %s, want %s", i+1, r.Proto, pr.wire())
		}
		if !bytes.Equal(r.Body, got[0].Body) {
			t.Errorf("request %d's body differs from the first's:\n%s\n%s", i+1, r.Body, got[0].Body)
		}
	}
	return got
}

// createRun is what a caller of anthropic-sdk-go saw of one create call.
type createRun struct {
	Resent bool // the server received the request more than once
	Status int  // the status of the *anthropic.Error returned; 0 for another error
}

// TestPeerAnthropicResendOnlyOnRateLimit plays anthropic-sdk-go's table of
// statuses for a call that creates something, over HTTP/1.1 and HTTP/2:
// it sends such a call again only after a 429, which proves the API did
// nothing. So does the Transport, except that it also takes
// x-should-retry: true as the server's word that the request may be sent
// again.
func TestPeerAnthropicResendOnlyOnRateLimit(t *testing.T) {
	tests := []struct {
		status      int
		shouldRetry string // x-should-retry; "" for none
		ours, peer  int    // attempts: the Transport's 5, anthropic-sdk-go's 1 + 2 retries
		differ      string
	}{
		{status: http.StatusRequestTimeout, ours: 1, peer: 1},
		{status: http.StatusConflict, ours: 1, peer: 1},
		{status: http.StatusInternalServerError, ours: 1, peer: 1},
		{status: http.StatusServiceUnavailable, ours: 1, peer: 1},
		{status: http.StatusInternalServerError, shouldRetry: "true", ours: 5, peer: 1, differ: rowShouldRetry},
		{status: http.StatusServiceUnavailable, shouldRetry: "true", ours: 5, peer: 1, differ: rowShouldRetry},
		{status: http.StatusGatewayTimeout, shouldRetry: "true", ours: 5, peer: 1, differ: rowShouldRetry},
		{status: 529, shouldRetry: "true", ours: 5, peer: 1, differ: rowShouldRetry},
		{status: http.StatusTooManyRequests, ours: 5, peer: 3},
		{status: http.StatusTooManyRequests, shouldRetry: "true", ours: 5, peer: 3},
		{status: http.StatusTooManyRequests, shouldRetry: "false", ours: 1, peer: 1},
	}
	for _, pr := range []proto{overHTTP, overH2} {
		t.Run(string(pr), func(t *testing.T) {
			t.Parallel()
			srv := peerServer(t, pr)
			for _, tc := range tests {
				t.Run(fmt.Sprintf("%d x-should-retry %q", tc.status, tc.shouldRetry), func(t *testing.T) {
					h := http.Header{"Retry-After-Ms": {"1"}, "Content-Type": {"application/json"}}
					if tc.shouldRetry != "" {
						h.Set("X-Should-Retry", tc.shouldRetry)
					}
					srv.Script(retrytest.Step{Status: tc.status, Header: h,
						Body: `{"type":"error","error":{"type":"api_error","message":"scripted"}}`})

					n := srv.Requests()
					err := createBatch(context.Background(), newAnthropic(&http.Client{Transport: freshBase(t, srv)}, srv.URL, 2))
					peerSent := len(sent(t, srv, n, pr))
					peer := createRun{Resent: peerSent > 1, Status: anthropicStatus(err)}

					n = srv.Requests()
					ft := retrytest.NewFakeTime()
					tr, _ := llmRecipe(freshBase(t, srv), ft)
					err = createBatch(context.Background(), newAnthropic(&http.Client{Transport: tr}, srv.URL, 0))
					oursSent := len(sent(t, srv, n, pr))
					ours := createRun{Resent: oursSent > 1, Status: anthropicStatus(err)}

					if oursSent != tc.ours || ours.Status != tc.status {
						t.Errorf("through the Transport: %d attempts, status %d; want %d, %d", oursSent, ours.Status, tc.ours, tc.status)
					}
					if peerSent != tc.peer || peer.Status != tc.status {
						t.Errorf("through anthropic-sdk-go's retries: %d attempts, status %d; want %d, %d", peerSent, peer.Status, tc.peer, tc.status)
					}
					// Each retry waited the server's retry-after-ms, on fake time.
					wantSleeps := make([]time.Duration, tc.ours-1)
					for i := range wantSleeps {
						wantSleeps[i] = time.Millisecond
					}
					if diff := cmp.Diff(wantSleeps, ft.Sleeps(), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("the Transport's sleeps (-want +got):\n%s", diff)
					}
					checkPeer(t, tc.differ, peer, ours)
				})
			}
		})
	}
}

// TestPeerAnthropicResendWhatWasNeverSent plays anthropic-sdk-go's test
// that a create call is sent again when its connection never opened: the
// dial was refused, or the TLS handshake failed. Both run in memory, in a
// testing/synctest bubble, since anthropic-sdk-go backs off on real timers.
func TestPeerAnthropicResendWhatWasNeverSent(t *testing.T) {
	tests := []struct {
		name       string
		dial       func() (net.Conn, error)
		ours, peer int // dials: the Transport's, and anthropic-sdk-go's with 1 retry
		differ     string
	}{{
		name: "dial refused",
		dial: func() (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		},
		ours: 5,
		peer: 2,
	}, {
		name: "TLS handshake",
		dial: func() (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				_ = tls.Server(server, &tls.Config{Certificates: []tls.Certificate{untrustedCert()}}).Handshake()
			}()
			return client, nil
		},
		ours:   1, // the certificate is not trusted, and will not be next time
		peer:   2,
		differ: rowCertificate,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var dials atomic.Int32
				newBase := func() *http.Transport {
					base := &http.Transport{
						DialContext: func(context.Context, string, string) (net.Conn, error) {
							dials.Add(1)
							return tc.dial()
						},
						TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12},
					}
					t.Cleanup(base.CloseIdleConnections)
					return base
				}
				const url = "https://api.anthropic.test/"

				err := createBatch(context.Background(), newAnthropic(&http.Client{Transport: newBase()}, url, 1))
				peerDials := int(dials.Swap(0))
				if err == nil {
					t.Error("anthropic-sdk-go's retries: no error")
				}
				tr, _ := llmRecipe(newBase(), nil)
				err = createBatch(context.Background(), newAnthropic(&http.Client{Transport: tr}, url, 0))
				oursDials := int(dials.Load())
				if err == nil {
					t.Error("the Transport: no error")
				}

				if oursDials != tc.ours || peerDials != tc.peer {
					t.Errorf("dials: %d through the Transport, %d through anthropic-sdk-go's retries; want %d, %d",
						oursDials, peerDials, tc.ours, tc.peer)
				}
				checkPeer(t, tc.differ, createRun{Resent: peerDials > 1}, createRun{Resent: oursDials > 1})
			})
		})
	}
}

// untrustedCert returns a self-signed certificate for api.anthropic.test,
// which no client trusts.
var untrustedCert = sync.OnceValue(func() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "api.anthropic.test"},
		DNSNames:     []string{"api.anthropic.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
})

// TestPeerAnthropicDoNotResendWhatMayHaveBeenSent plays anthropic-sdk-go's
// test that a create call is not sent again once the server may have
// processed it: the connection dropped before the response or part-way
// through its body, or the attempt timed out after it connected. Over
// HTTP/1.1 and HTTP/2, both send it once.
func TestPeerAnthropicDoNotResendWhatMayHaveBeenSent(t *testing.T) {
	const timeout = 100 * time.Millisecond // real time: an attempt against a server that never answers
	tests := []struct {
		name    string
		step    retrytest.Step
		timeout bool // the attempt times out: WithRequestTimeout for the SDK, AttemptTimeout for the Transport
	}{{
		name: "connection dropped before a response",
		step: retrytest.Step{Reset: true},
	}, {
		name: "connection dropped part-way through the body",
		step: retrytest.Step{Header: http.Header{"Content-Type": {"application/json"}}, Body: "{", BodySize: 100, ResetAfter: 1},
	}, {
		name:    "attempt timed out after it connected",
		step:    retrytest.Step{Hang: true},
		timeout: true,
	}}
	for _, pr := range []proto{overHTTP, overH2} {
		t.Run(string(pr), func(t *testing.T) {
			t.Parallel()
			srv := peerServer(t, pr)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					srv.Script(tc.step)
					var opts []option.RequestOption
					if tc.timeout {
						opts = append(opts, option.WithRequestTimeout(timeout))
					}
					n := srv.Requests()
					peerErr := createBatch(context.Background(), newAnthropic(&http.Client{Transport: freshBase(t, srv)}, srv.URL, 2, opts...))
					peer := len(sent(t, srv, n, pr))

					n = srv.Requests()
					tr, _ := llmRecipe(freshBase(t, srv), retrytest.NewFakeTime())
					if tc.timeout {
						tr.Policy.AttemptTimeout = timeout
					}
					oursErr := createBatch(context.Background(), newAnthropic(&http.Client{Transport: tr}, srv.URL, 0))
					ours := len(sent(t, srv, n, pr))

					if peerErr == nil || oursErr == nil {
						t.Errorf("errors: %v through anthropic-sdk-go's retries, %v through the Transport; want both", peerErr, oursErr)
					}
					if ours != 1 || peer != 1 {
						t.Errorf("attempts: %d through the Transport, %d through anthropic-sdk-go's retries; want 1 each", ours, peer)
					}
					checkPeer(t, "", createRun{Resent: peer > 1}, createRun{Resent: ours > 1})
				})
			}
		})
	}
}

// watchedBody is a response body that records whether it was read and
// whether it was closed.
type watchedBody struct {
	r            io.Reader
	read, closed atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

func (b *watchedBody) Close() error {
	b.closed.Store(true)
	return nil
}

// scripted is an in-memory RoundTripper that answers its n-th request
// (counting from 1) with respond(n), and keeps every request body.
type scripted struct {
	respond func(n int) *http.Response
	mu      sync.Mutex // protects bodies
	bodies  []string
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	n := len(s.bodies)
	s.mu.Unlock()
	resp := s.respond(n)
	resp.Request = req
	return resp, nil
}

// sentBodies returns the request bodies received so far.
func (s *scripted) sentBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// TestPeerAnthropicRetriedBodyNotRead plays anthropic-sdk-go's test that
// the body of a response it retries is closed unread: a 500 then a 400 for
// a message. The Transport retries it too (the recipe allows generation
// to be sent again) but reads the discarded body, bounded, before closing
// it, so that its connection can be reused.
func TestPeerAnthropicRetriedBodyNotRead(t *testing.T) {
	type run struct {
		Attempts  int
		Status    int  // of the *anthropic.Error returned
		FirstRead bool // the retried response's body was read
		Closed    bool // and closed
	}
	synctest.Test(t, func(t *testing.T) {
		call := func(newClient func(*scripted) anthropic.Client) run {
			t.Helper()
			first := &watchedBody{r: strings.NewReader(`{"type":"error","error":{"type":"api_error","message":"internal"}}`)}
			rt := &scripted{respond: func(n int) *http.Response {
				if n == 1 {
					return &http.Response{StatusCode: http.StatusInternalServerError, Body: first,
						Header: http.Header{"Retry-After-Ms": {"1"}, "Content-Type": {"application/json"}}}
				}
				return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
					Body: io.NopCloser(strings.NewReader(`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`))}
			}}
			client := newClient(rt)
			_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
				MaxTokens: 1024,
				Model:     "claude-test",
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))},
			})
			bodies := rt.sentBodies()
			for i, b := range bodies {
				if b != bodies[0] {
					t.Errorf("request %d's body differs from the first's:\n%s\n%s", i+1, b, bodies[0])
				}
			}
			return run{Attempts: len(bodies), Status: anthropicStatus(err), FirstRead: first.read.Load(), Closed: first.closed.Load()}
		}
		const url = "https://api.anthropic.test/"
		peer := call(func(rt *scripted) anthropic.Client {
			return newAnthropic(&http.Client{Transport: rt}, url, 1)
		})
		ours := call(func(rt *scripted) anthropic.Client {
			tr, _ := llmRecipe(rt, nil)
			return newAnthropic(&http.Client{Transport: tr}, url, 0)
		})
		if want := (run{Attempts: 2, Status: http.StatusBadRequest, FirstRead: true, Closed: true}); ours != want {
			t.Errorf("through the Transport: %+v; want %+v", ours, want)
		}
		if want := (run{Attempts: 2, Status: http.StatusBadRequest, FirstRead: false, Closed: true}); peer != want {
			t.Errorf("through anthropic-sdk-go's retries: %+v; want %+v", peer, want)
		}
		checkPeer(t, rowRetriedBody, peer, ours)
	})
}
