package interop_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopStripeMock()
	if code == 0 {
		// Every client's idle connections are closed at the end of its
		// test; what remains is a leak.
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// retrier is a retry.Transport on fake time, with the attempts it made
// counted through OnRetry.
type retrier struct {
	*retry.Transport
	ft     *retrytest.FakeTime
	events chan retry.Event // every OnRetry, buffered
}

// newRetrier returns a Transport over base whose Policy sleeps on fake
// time (Rand 1: every backoff sits on its bound), and closes base's idle
// connections when the test ends.
func newRetrier(t *testing.T, base *http.Transport) *retrier {
	t.Helper()
	ft := retrytest.NewFakeTime()
	r := &retrier{ft: ft, events: make(chan retry.Event, 64)}
	r.Transport = &retry.Transport{
		Base: base,
		Policy: retry.Policy{
			Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
			OnRetry: func(e retry.Event) { r.events <- e },
		},
	}
	t.Cleanup(base.CloseIdleConnections)
	return r
}

// retries returns the number of retries OnRetry reported so far.
func (r *retrier) retries() int { return len(r.events) }

// client returns an *http.Client on the Transport.
func (r *retrier) client() *http.Client { return &http.Client{Transport: r.Transport} }

// plainTransport returns a fresh http.Transport, so that no test shares a
// connection pool with another.
func plainTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}
