package retry

import (
	"context"
	"net/http"
	"time"
)

// attemptKey is the context key under which an attempt's context answers
// its number.
type attemptKey struct{}

// AttemptFromContext returns which attempt of its call ctx belongs to,
// counting from 1, for code that runs under an attempt: a base
// RoundTripper under a [Transport], a function given to [Do], or anything
// they call with a context derived from theirs. It reports false for any
// other context. Tracing uses it to mark resends.
func AttemptFromContext(ctx context.Context) (int, bool) {
	if ctx == nil {
		return 0, false
	}
	n, ok := ctx.Value(attemptKey{}).(int)
	return n, ok
}

// Outcome describes a call that has ended, for Policy.OnDone.
type Outcome struct {
	Attempts int           // attempts made
	Slept    time.Duration // time slept between attempts, in all, by Policy.Clock
	Reason   Reason        // why retrying stopped without success, or why a failure the rules retry was not retried; empty otherwise

	// Waited is the time spent waiting for the Transport's Pacer before
	// attempts, in all; zero without a Pacer.
	Waited time.Duration

	// Hedges is how many of the Attempts were hedges (see Policy.Hedge).
	Hedges int

	// Err is what the call returned: nil on success and, for a Transport,
	// whenever it returned a response, whatever its status.
	Err error

	// Last is the last retryable error the call met, if any: the
	// *StatusError of the response a Transport hands back when it gives up
	// on a retryable status, with Err nil.
	Last error

	Request *http.Request   // the Transport's request; nil for Do
	Context context.Context // the caller's context
}

// done reports the end of the call to Policy.OnDone, if set, and returns
// err. req is the Transport's request, or nil.
func (l *loop) done(req *http.Request, err error) error {
	if l.p.OnDone != nil {
		l.p.OnDone(Outcome{Attempts: l.attempt, Slept: l.slept, Reason: l.reason, Waited: l.paced, Hedges: l.hedges, Err: err, Last: l.last,
			Request: req, Context: l.ctx})
	}
	return err
}
