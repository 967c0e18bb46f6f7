package retrygrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// UnaryClientInterceptor returns an interceptor that runs each unary call
// through [retry.Do] with p. Install it with [grpc.WithUnaryInterceptor],
// and turn grpc's own retries off with [grpc.WithDisableRetry] so that the
// two layers do not multiply each other's attempts.
//
// An attempt's error is judged by p.Retryable, or by [IsRetryable] when it
// is nil. An attempt that ended because its own AttemptTimeout passed, while
// the caller's context is still alive, is retried as well: a server's
// DEADLINE_EXCEEDED and an attempt cut short look the same in the status,
// and only the interceptor knows which one happened. A p.Retryable of your
// own sees such an attempt's error match [context.DeadlineExceeded] under
// [errors.Is]; a server's DEADLINE_EXCEEDED does not.
//
// The server's hint of when to try again, a grpc-retry-pushback-ms trailer
// or a google.rpc.RetryInfo status detail, is a floor of the next delay, as
// Retry-After is for HTTP (see [retry.WithRetryAfter]); when both are sent
// the longer counts. A pushback that is negative, malformed or sent twice
// asks the client not to retry, and the call ends with that status.
//
// The call returns what [retry.Do] returns: the status error unchanged, the
// very value grpc returned, when it is not retried; a [*retry.Error]
// wrapping the last attempt's status error when retrying stops without
// success, so that [status.Code] still gives the last code; and, when the
// caller's context is done, an error that matches its ctx.Err() under
// [errors.Is] and whose status.Code is CANCELED or DEADLINE_EXCEEDED.
//
// grpc.Header and grpc.Trailer call options see the metadata of the last
// attempt: each attempt collects its own. p.OnRetry sees the attempt's
// status error as grpc returned it.
//
// Every method is retried alike. A method that must not run twice (one
// that is not idempotent) needs an interceptor without retries, or a
// p.Retryable that refuses it.
//
// A Policy with a negative field makes every call fail with an error
// wrapping [retry.ErrInvalidPolicy] before any attempt. The interceptor is
// safe for concurrent use when p's functions are.
func UnaryClientInterceptor(p retry.Policy) grpc.UnaryClientInterceptor {
	judge := p.Retryable
	if judge == nil {
		judge = func(err error) bool {
			return errors.Is(err, errAttemptTimedOut) || IsRetryable(err)
		}
	}
	// The attempt judges its own error, with the context only it has; the
	// loop retries what the attempt marked.
	p.Retryable = marked
	if onRetry := p.OnRetry; onRetry != nil {
		p.OnRetry = func(e retry.Event) {
			e.Err = unmark(e.Err)
			onRetry(e)
		}
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c := newCall(ctx, method, req, reply, cc, invoker, opts, judge)
		_, err := retry.Do(ctx, p, c.attempt)
		return c.result(err)
	}
}

// call is one unary call and its attempts, which run one after the other.
type call struct {
	ctx        context.Context // the caller's
	method     string
	req, reply any
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	judge      func(error) bool
	opts       []grpc.CallOption // the caller's, less Header and Trailer, then ours
	headers    []*metadata.MD    // the caller's grpc.Header targets
	trailers   []*metadata.MD    // the caller's grpc.Trailer targets
	header     metadata.MD       // the current attempt's, collected by grpc
	trailer    metadata.MD       // the current attempt's, collected by grpc
}

func newCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts []grpc.CallOption, judge func(error) bool) *call {
	c := &call{ctx: ctx, method: method, req: req, reply: reply, cc: cc, invoker: invoker, judge: judge}
	c.opts = make([]grpc.CallOption, 0, len(opts)+2)
	for _, o := range opts {
		// The caller's targets would keep an earlier attempt's metadata
		// whenever a later one fails before grpc collects any (grpc writes
		// them only for an attempt that got a stream), so they are filled
		// from each attempt's own.
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			c.headers = append(c.headers, o.HeaderAddr)
		case *grpc.HeaderCallOption:
			if o != nil {
				c.headers = append(c.headers, o.HeaderAddr)
			}
		case grpc.TrailerCallOption:
			c.trailers = append(c.trailers, o.TrailerAddr)
		case *grpc.TrailerCallOption:
			if o != nil {
				c.trailers = append(c.trailers, o.TrailerAddr)
			}
		default:
			c.opts = append(c.opts, o)
		}
	}
	if len(c.headers) > 0 {
		c.opts = append(c.opts, grpc.Header(&c.header))
	}
	c.opts = append(c.opts, grpc.Trailer(&c.trailer)) // the pushback is a trailer
	return c
}

// attempt is the function given to retry.Do: one try of the call.
func (c *call) attempt(ctx context.Context) (struct{}, error) {
	c.header, c.trailer = nil, nil
	err := c.invoker(ctx, c.method, c.req, c.reply, c.cc, c.opts...)
	c.publish()
	if err == nil || c.ctx.Err() != nil {
		return struct{}{}, err // the loop sees to a caller who left
	}
	judged := err
	if timedOut(ctx, c.ctx, err) {
		judged = &attemptTimeoutError{err}
	}
	if !c.judge(judged) {
		return struct{}{}, err
	}
	hint, stop := pushback(c.trailer)
	if stop {
		return struct{}{}, err
	}
	if d, ok := retryInfo(err); ok && d > hint {
		hint = d
	}
	return struct{}{}, retry.WithRetryAfter(&retryableError{err}, hint)
}

// timedOut reports whether err ended an attempt because the attempt's own
// timeout passed, rather than the caller's deadline or a server's.
//
// The deadline is read rather than ctx.Err(): grpc sends it to the server
// (grpc-timeout), whose DEADLINE_EXCEEDED may arrive a moment before the
// client's own timer fires. A server's answer before the attempt's deadline
// is its own.
func timedOut(attempt, caller context.Context, err error) bool {
	if status.Code(err) != codes.DeadlineExceeded {
		return false
	}
	ad, ok := attempt.Deadline()
	if !ok {
		return false
	}
	if cd, ok := caller.Deadline(); ok && !ad.Before(cd) {
		return false // the caller's deadline, which is final
	}
	return attempt.Err() == context.DeadlineExceeded || deadlinePassed(attempt)
}

// publish hands the attempt's metadata to the caller's grpc.Header and
// grpc.Trailer targets, replacing the previous attempt's.
func (c *call) publish() {
	for _, md := range c.headers {
		if md != nil {
			*md = c.header
		}
	}
	for _, md := range c.trailers {
		if md != nil {
			*md = c.trailer
		}
	}
}

// result turns what retry.Do returned into what the call returns.
func (c *call) result(err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*retry.Error); ok {
		// A copy: the last error as grpc returned it, without the marks
		// that only the loop needed.
		return &retry.Error{Reason: e.Reason, Attempts: e.Attempts, Err: unmark(e.Err)}
	}
	cerr := c.ctx.Err()
	if cerr == nil && status.Code(err) == codes.DeadlineExceeded && deadlinePassed(c.ctx) {
		// The server, which grpc told the caller's deadline, answered a
		// moment before the caller's own timer fired.
		cerr = context.DeadlineExceeded
	}
	if cerr == nil {
		return err
	}
	if !errors.Is(err, cerr) {
		err = fmt.Errorf("retrygrpc: %w; last error: %w", cerr, err)
	}
	st := status.FromContextError(cerr)
	if status.Code(err) != st.Code() {
		// Retrying stopped during a backoff, or after an attempt whose
		// error was another code: grpc's own calls report the caller's
		// cancel as CANCELED, and callers test for it that way.
		return &canceledError{err: err, st: st}
	}
	return err
}

// deadlinePassed reports whether ctx has a deadline that has passed.
func deadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// retryableError marks an attempt's error that may pass on another try.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// marked is the loop's Policy.Retryable: the attempt has judged already.
func marked(err error) bool {
	var re *retryableError
	return errors.As(err, &re)
}

// unmark returns the error grpc returned, without the marks the attempt
// added for the loop.
func unmark(err error) error {
	var re *retryableError
	if errors.As(err, &re) {
		return re.err
	}
	return err
}

// errAttemptTimedOut is matched by the error that the judge sees for an
// attempt cut by its own timeout.
var errAttemptTimedOut = errors.New("retrygrpc: attempt timed out")

// attemptTimeoutError is an attempt's error when its own timeout ended it.
// It matches context.DeadlineExceeded, so that a Policy.Retryable such as
// retry.IsRetryable takes it for the attempt timeout it is, and still
// carries the status for status.Code.
type attemptTimeoutError struct{ err error }

func (e *attemptTimeoutError) Error() string { return "retrygrpc: attempt timed out: " + e.err.Error() }
func (e *attemptTimeoutError) Unwrap() []error {
	return []error{errAttemptTimedOut, context.DeadlineExceeded, e.err}
}

// canceledError is the error of a call whose caller's context is done.
type canceledError struct {
	err error          // what retry.Do returned; matches ctx.Err()
	st  *status.Status // CANCELED or DEADLINE_EXCEEDED
}

func (e *canceledError) Error() string              { return e.err.Error() }
func (e *canceledError) Unwrap() error              { return e.err }
func (e *canceledError) GRPCStatus() *status.Status { return e.st }
