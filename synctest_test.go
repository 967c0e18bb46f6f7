package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// hangingBase answers its first attempt only when the attempt's context
// ends, as a server that never answers does, its second with a 503 whose
// body must be drained, and the rest with a 200 in time.
type hangingBase struct{ calls atomic.Int32 }

func (b *hangingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	switch b.calls.Add(1) {
	case 1:
		<-req.Context().Done()
		return nil, context.Cause(req.Context())
	case 2:
		return &http.Response{StatusCode: 503, Header: http.Header{}, Request: req,
			Body: io.NopCloser(strings.NewReader("overloaded"))}, nil
	}
	_ = req.Context().Done() // watched, as net/http watches every attempt, and answered in time
	return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req,
		Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

// useLibrary runs a Transport call whose first attempt times out and a Do
// call whose first attempt times out, with attempt timeout d, and checks
// both succeed on a later attempt.
func useLibrary(t *testing.T, d time.Duration, sleep func(context.Context, time.Duration) error) {
	t.Helper()
	base := new(hangingBase)
	tr := NewTransport(base, Policy{AttemptTimeout: d, Deadline: 10 * d, Base: d, Sleep: sleep})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	if got := readAll(t, resp); got != "ok" || base.calls.Load() != 3 {
		t.Errorf("body %q after %d attempts, want ok after 3", got, base.calls.Load())
	}
	calls := 0
	v, err := Do(context.Background(), Policy{AttemptTimeout: d, Deadline: 10 * d, Base: d, Sleep: sleep}, func(ctx context.Context) (int, error) {
		if calls++; calls == 1 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls != 2 {
		t.Errorf("Do = %d, %v after %d calls; want 42 after 2", v, err, calls)
	}
	for range 10 { // attempts that end before their timeout
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
		if err != nil || readAll(t, resp) != "ok" {
			t.Fatalf("RoundTrip = %v, %v; want 200 ok", resp, err)
		}
	}
}

// TestSynctestAndRealTime uses the library inside testing/synctest bubbles
// and outside them, in turn, in one test binary: nothing made in a bubble
// (a timer above all) may serve a call outside it, nor the other way round.
// Inside a bubble the attempt timeout runs in virtual time: the hour-long
// timeouts below take no real time.
func TestSynctestAndRealTime(t *testing.T) {
	noWait := func(context.Context, time.Duration) error { return nil }
	inBubble := func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			useLibrary(t, time.Hour, nil) // the default Sleep waits in virtual time too
			if took := time.Since(start); took < 2*time.Hour {
				t.Errorf("virtual time passed: %v, want the two attempt timeouts at least", took)
			}
		})
	}
	outside := func(t *testing.T) { useLibrary(t, 20*time.Millisecond, noWait) }
	begin := time.Now()
	// Rounds in both orders: what one world leaves in a cache, if the
	// library kept any, the next round in the other world would find.
	for range 5 {
		for _, order := range [][]func(*testing.T){{outside, inBubble}, {inBubble, outside}} {
			for _, run := range order {
				run(t)
			}
		}
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("took %v of real time, want well under a second: bubble time leaked into real time", took)
	}
}

// TestSynctestStalledDrain: inside a bubble, a discarded body that stalls
// is closed when the attempt's timeout passes, in virtual time.
func TestSynctestStalledDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls int
		tr := NewTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if calls++; calls == 1 {
				r, _ := io.Pipe() // nobody writes: reads block until closed
				return &http.Response{StatusCode: 503, Header: http.Header{}, Body: r, Request: req}, nil
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		}), Policy{AttemptTimeout: time.Minute, Deadline: time.Hour})
		start := time.Now()
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.example/", nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want the 200 of the second attempt", resp, err)
		}
		if took := time.Since(start); took < time.Minute || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("virtual time passed: %v, want the attempt timeout of the drained one", took)
		}
	})
}
