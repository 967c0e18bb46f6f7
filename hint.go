package retry

import "time"

// WithRetryAfter returns an error that wraps err and carries the server's
// hint d of how long to wait before the next attempt, for errors that are
// not a [*StatusError]: a gRPC status with a pushback, a queue's "try again
// in" reply. The loop treats d exactly as StatusError.RetryAfter: it is a
// floor of the delay before the next attempt, a hint that cannot end before
// the Deadline stops retrying at once, and Event.FromRetryAfter reports it.
//
// The result's Error is err's, and [errors.Is], [errors.As] and
// Policy.Retryable see through it to err: whether to retry is still judged
// by err. A d of zero or less carries no hint. WithRetryAfter(nil, d) is nil.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &hintError{err: err, d: d}
}

// hintError is the error WithRetryAfter returns.
type hintError struct {
	err error
	d   time.Duration
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// retryAfter returns the server's hint carried by err, if any: the first
// WithRetryAfter or StatusError.RetryAfter in its chain.
func retryAfter(err error) (time.Duration, bool) {
	for err != nil {
		switch e := err.(type) {
		case *hintError:
			if e.d > 0 {
				return e.d, true
			}
			return 0, false
		case *StatusError:
			if e.RetryAfter > 0 {
				return e.RetryAfter, true
			}
			return 0, false
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if d, ok := retryAfter(e); ok {
					return d, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}
