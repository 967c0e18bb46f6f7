package pace

import (
	"io"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// fakeTime returns p with its Clock, Sleep and Rand taken from a new
// FakeTime, so that no wait is real.
func fakeTime(p retry.Policy) (retry.Policy, *retrytest.FakeTime) {
	ft := retrytest.NewFakeTime()
	p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
	return p, ft
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// newRequest makes a request bound to the test's context, failing the test
// on error.
func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
