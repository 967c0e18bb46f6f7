package retry_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// everyPacer is a Pacer of a fixed rate, one request per interval, as a
// golang.org/x/time/rate limiter with a burst of 1 would be: what it takes
// to plug another pacer into a Transport. It is its own Reservation.
type everyPacer struct {
	interval time.Duration

	mu   sync.Mutex
	next time.Time // the first moment free
}

func (p *everyPacer) Reserve(_ *http.Request, _ int, clock clockwork.Clock, _ time.Duration) (retry.Reservation, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := clock.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.interval)
	return p, at.Sub(now) // it is its own Reservation: Ready says 0, Cancel and Done do nothing
}

func (p *everyPacer) Ready(clockwork.Clock, time.Duration, bool) time.Duration { return 0 }
func (p *everyPacer) Cancel()                                                  {}
func (p *everyPacer) Done(*http.Request, *http.Response, error, clockwork.Clock, time.Duration, time.Duration) {
}

// TestTransportTakesAnyPacer: a Pacer of a fixed rate spaces the calls of
// a Transport; the waits come on the Policy's clock and count in
// Outcome.Waited, apart from sleeps.
func TestTransportTakesAnyPacer(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	var waited []time.Duration
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
		OnDone: func(o retry.Outcome) { waited = append(waited, o.Waited) }}
	base := roundTripper(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	tr := &retry.Transport{Base: base, Policy: p, Pacer: &everyPacer{interval: time.Second}}
	for range 3 {
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://api.example/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The fake clock moves only by the waits: each call finds the next
	// slot a second after the last.
	if diff := cmp.Diff([]time.Duration{0, time.Second, time.Second}, waited); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// TestTransportPacerWaitPastTheDeadline: a Pacer's wait that cannot end
// before the call's Deadline ends the call at once with ReasonDeadline,
// and its place is given back.
func TestTransportPacerWaitPastTheDeadline(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Deadline: 500 * time.Millisecond}
	base := roundTripper(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	pacer := &everyPacer{interval: time.Second}
	tr := &retry.Transport{Base: base, Policy: p, Pacer: pacer}
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, err = tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://api.example/", nil))
	var rerr *retry.Error
	if !errors.As(err, &rerr) || rerr.Reason != retry.ReasonDeadline || rerr.Attempts != 0 {
		t.Errorf("err = %v, want a *retry.Error with ReasonDeadline before any attempt", err)
	}
	if len(ft.Sleeps()) != 0 {
		t.Errorf("slept %v, want no wait at all", ft.Sleeps())
	}
}
