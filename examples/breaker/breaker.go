package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sony/gobreaker/v2"
)

// breakerRoundTripper sends each request through a circuit breaker. Put it
// inside retry.Transport, as the Transport's base, so that the breaker sees
// every attempt:
//
//	retry.NewTransport(breakerRoundTripper{base, cb}, policy)
//
// A transport error and a 5xx response count as failures; a 5xx response is
// still returned, so that the retry loop can judge its status and
// Retry-After. While the breaker is open (and while its half-open probe is
// in flight), a request fails at once, without reaching the server, with an
// error wrapping gobreaker.ErrOpenState (or gobreaker.ErrTooManyRequests).
// retry.IsRetryable rejects that error, so the retry loop stops at once
// instead of spending its attempts and sleeps on a breaker that will not
// let them through. A Policy with its own Retryable must reject it too.
type breakerRoundTripper struct {
	base http.RoundTripper
	cb   *gobreaker.CircuitBreaker[*http.Response]
}

// errServerFailed marks a 5xx response as a failure for the breaker; the
// response itself is still returned.
var errServerFailed = errors.New("server error status")

// RoundTrip sends req through the breaker.
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
		// The base never saw the request, so its body is ours to close: a
		// RoundTripper closes the request body on every path.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("circuit breaker %q: %w", t.cb.Name(), err)
	}
	return resp, err
}

// newBreaker returns a breaker that opens after three failed attempts in a
// row and lets one probe through once timeout has passed. A caller that
// gives up (context.Canceled) says nothing about the server and is not
// counted.
func newBreaker(name string, timeout time.Duration, onChange func(from, to gobreaker.State)) *gobreaker.CircuitBreaker[*http.Response] {
	return gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:    name,
		Timeout: timeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= 3
		},
		IsExcluded: func(err error) bool {
			return errors.Is(err, context.Canceled)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if onChange != nil {
				onChange(from, to)
			}
		},
	})
}
