package interop_test

// The peer tests take scenarios from the retry tests of other Go clients and
// run each twice against the same local server: once through the peer's own
// retrying (an SDK with its retries on over a plain transport, or the peer
// library's client) and once through retry.Transport (for an LLM SDK,
// docs/llm.md's recipe, with the SDK's retries off). Each test asserts what
// the Transport does, asserts what the peer does, and checks that the two
// agree; where they differ on purpose, the case names the row of
// docs/sdks.md's table "Where we differ from the SDKs and peers, on
// purpose" that says why, and the test checks that the row is there and that
// the two still differ.
//
// Where each scenario comes from:
//
//   - peers_openai_test.go: openai-go v3.98.0's retry-after minimum table
//     (TestRetryAfterServerMinimum), its test of a retry-after longer than
//     the time left before the caller's deadline
//     (TestRetryAfterServerDelayCancellation), and its context deadline
//     tests, for a plain call, a stream, and a stream under a request
//     timeout (TestContextDeadline, TestContextDeadlineStreaming,
//     TestContextDeadlineStreamingWithRequestTimeout).
//   - peers_anthropic_test.go: anthropic-sdk-go v2.15.0's conservative-retry
//     tests for calls that create something: resend only on a rate limit,
//     resend what was never sent, don't resend what may have been sent
//     (TestConservativeRetriesResendOnlyOnRateLimit,
//     TestConservativeRetriesResendWhatWasNeverSent,
//     TestConservativeRetriesDoNotResendWhatMayHaveBeenSent), run here over
//     HTTP/1.1 and HTTP/2; and its test that a retried response's body is
//     not read (TestRetriedResponseBodyNotRead).
//   - peers_retryablehttp_test.go: go-retryablehttp v0.7.8's Retry-After
//     parsing table (TestParseRetryAfterHeader), the errors its default
//     retry policy ends after one attempt (a certificate it does not trust,
//     a redirect loop, an unsupported scheme, an invalid header name or
//     value: TestClient_DefaultRetryPolicy_TLS, _redirects, _invalidscheme,
//     _invalidheadername, _invalidheadervalue), and its redirect of a
//     request with a body (TestClient_RedirectWithBody).
//   - peers_rehttp_test.go: rehttp v1.4.0's timeout tests, whose errors
//     under http.Client.Timeout must be those of a plain http.Transport (a
//     server that never answers, a slow body, a retry that hangs, a delay
//     longer than the timeout: TestClientTimeout, TestClientTimeoutSlowBody,
//     TestClientTimeoutOnRetry), and its base transport's header timeout
//     (TestTransportTimeout).
//   - peers_failsafe_test.go: failsafe-go v0.9.8's test that a response body
//     can still be read after RoundTrip returns (TestContextCancellation in
//     failsafehttp).
//
// Time: no test waits for a backoff. Where a peer sleeps on real timers, both
// runs happen inside a testing/synctest bubble, against retrytest's in-memory
// server or an in-memory RoundTripper, and waits are measured in the bubble's
// time. Elsewhere the Transport sleeps on retrytest.FakeTime, and the peer
// waits a millisecond's retry-after-ms at most; only the attempt timeouts
// against a server that never answers (100 ms, on loopback) take real time.

import (
	"bufio"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// differHeading is the heading of the table in docs/sdks.md that says
// where, and why, the Transport does not do what a peer does.
const differHeading = "## Where we differ from the SDKs and peers, on purpose"

// The rows of that table, by their first cell, named by the cases that
// differ.
const (
	rowLongHint       = "A `Retry-After` longer than 2 minutes"
	rowExponent       = "A `Retry-After` in exponent notation"
	rowHintFloor      = "A `Retry-After` shorter than the backoff"
	rowDateForms      = "A `Retry-After` date in the RFC 850 or asctime form"
	rowCallerDeadline = "A wait that would outlast the caller's deadline"
	rowShouldRetry    = "`x-should-retry: true` on a 5xx, for a call that creates something"
	rowCertificate    = "A TLS handshake that fails on the certificate"
	rowRetriedBody    = "The body of a response that is retried"
	rowRedirectBody   = "A 307 redirect of a body without `GetBody`"
)

// TestPeerDifferRows checks that docs/sdks.md's table of differences has
// a row for each difference the peer tests find, and no other: every row
// it shows is one a test asserts.
func TestPeerDifferRows(t *testing.T) {
	rows, err := differRows()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"scenario": true, "---": true} // the header and the separator
	for _, row := range []string{rowLongHint, rowExponent, rowHintFloor, rowDateForms, rowCallerDeadline,
		rowShouldRetry, rowCertificate, rowRetriedBody, rowRedirectBody} {
		want[row] = true
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("the rows of %q in docs/sdks.md (-tested +documented):\n%s", differHeading, diff)
	}
}

// differRows returns the first cells of the rows of docs/sdks.md's table of
// differences.
var differRows = sync.OnceValues(func() (map[string]bool, error) {
	f, err := os.Open("../docs/sdks.md")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == differHeading
		case in && strings.HasPrefix(line, "| "):
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			rows[cell] = true
		}
	}
	return rows, sc.Err()
})

// checkPeer compares what the peer did with what the Transport did. With
// row empty the two must be equal. Otherwise they must differ, and row must
// be a row of docs/sdks.md's table of differences.
func checkPeer[T any](t *testing.T, row string, peer, ours T) {
	t.Helper()
	diff := cmp.Diff(peer, ours)
	switch {
	case row == "" && diff != "":
		t.Errorf("the Transport does not do what the peer does (-peer +ours):\n%s", diff)
	case row != "" && diff == "":
		t.Errorf("the Transport now does what the peer does: %+v; drop the row %q from docs/sdks.md", ours, row)
	case row != "":
		rows, err := differRows()
		if err != nil {
			t.Fatal(err)
		}
		if !rows[row] {
			t.Errorf("docs/sdks.md has no row %q under %q", row, differHeading)
		}
	}
}

// comparePeer checks a scenario's two runs: ours against want, the peer's
// against peerWant (want when nil), and that they differ only where row,
// a row of docs/sdks.md's table, says they do. peer names the peer in
// messages.
func comparePeer[T any](t *testing.T, peer string, want T, peerWant *T, row string, peerGot, ours T) {
	t.Helper()
	if diff := cmp.Diff(want, ours); diff != "" {
		t.Errorf("through the Transport (-want +got):\n%s", diff)
	}
	if peerWant == nil {
		peerWant = &want
	}
	if diff := cmp.Diff(*peerWant, peerGot); diff != "" {
		t.Errorf("through %s (-want +got):\n%s", peer, diff)
	}
	checkPeer(t, row, peerGot, ours)
}

// retries records the delay of each retry a Transport reports.
type retries struct {
	mu     sync.Mutex // protects delays
	delays []time.Duration
}

func (r *retries) onRetry(e retry.Event) {
	r.mu.Lock()
	r.delays = append(r.delays, e.Delay)
	r.mu.Unlock()
}

// all returns the delays so far.
func (r *retries) all() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.delays...)
}

// llmRecipe returns docs/llm.md's Transport for the OpenAI and Anthropic
// SDKs, sending through base, with its retries recorded instead of logged.
// Its Replayable defers to retry.Idempotent for every other request, as
// docs/sdks.md's does, so that the SDKs' GETs (a model list, a batch's
// status) are retried after a 5xx as they would be with no Replayable.
// With ft it sleeps on ft; with nil, on the real clock, which inside a
// testing/synctest bubble is the bubble's. Rand is 0: a backoff is 0 and a
// Retry-After gets no jitter, so every delay is the server's hint alone,
// as the SDKs wait it.
func llmRecipe(base http.RoundTripper, ft *retrytest.FakeTime) (*retry.Transport, *retries) {
	rec := new(retries)
	policy := retry.Policy{
		MaxAttempts:      5,
		AttemptTimeout:   2 * time.Minute,
		Deadline:         5 * time.Minute,
		Retryable:        retry.LLMRetryable,
		RetryAfterJitter: 0.1,
		OnRetry:          rec.onRetry,
		Rand:             func() float64 { return 0 },
	}
	if ft != nil {
		policy.Clock, policy.Sleep = ft.Clock, ft.Sleep
	}
	return &retry.Transport{
		Base:   base,
		Policy: policy,
		Stream: &retry.Stream{Event: retry.LLMEvent},
		Replayable: func(req *http.Request) bool {
			return strings.HasSuffix(req.URL.Path, "/v1/chat/completions") ||
				strings.HasSuffix(req.URL.Path, "/v1/responses") ||
				strings.HasSuffix(req.URL.Path, "/v1/messages") || // not an Assistants thread's /messages
				retry.Idempotent(req)
		},
	}, rec
}
