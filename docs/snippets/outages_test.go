package snippets_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/retrykit/retry"
	"github.com/sony/gobreaker/v2"
)

// The snippets of docs/outages.md.

func Example_outagesBudget() {
	budget := &retry.Budget{} // share one per service: Ratio 0.1, MinPerSecond 10, Window 10 s
	client := &http.Client{Transport: &retry.Transport{Policy: retry.Policy{Budget: budget}}}

	_ = client
}

func Example_outagesBreaker() {
	cb := gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        "api",
		Timeout:     30 * time.Second, // open this long, then let one probe through
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
	})
	client := &http.Client{Transport: &retry.Transport{
		Base: breakerRoundTripper{base: http.DefaultTransport, cb: cb}, // the breaker, inside
	}}

	_ = client
}

// breakerRoundTripper runs each attempt through a circuit breaker; a 5xx
// counts as a failure but is still returned, so the retry loop reads its
// status and Retry-After. examples/breaker has it with its tests.
type breakerRoundTripper struct {
	base http.RoundTripper
	cb   *gobreaker.CircuitBreaker[*http.Response]
}

// errServerFailed marks a 5xx for the breaker.
var errServerFailed = errors.New("server error status")

func (t breakerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.cb.Execute(func() (*http.Response, error) {
		resp, err := t.base.RoundTrip(req)
		if err == nil && resp.StatusCode >= 500 {
			return resp, errServerFailed
		}
		return resp, err
	})
	switch {
	case errors.Is(err, errServerFailed):
		return resp, nil
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		if req.Body != nil { // the base never saw it: closing it is ours to do
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("circuit breaker %q: %w", t.cb.Name(), err)
	}
	return resp, err
}
