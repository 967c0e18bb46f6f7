package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/wire"
)

// Transport is a [net/http.RoundTripper] that retries requests by the rules
// of its Policy. Put it in a [net/http.Client] (or hand such a client to an
// SDK) and every request through it is retried when that is safe and useful.
//
// A response with status 400 or more is judged as a [*StatusError] by
// Policy.Retryable. A response that is not retried is returned unchanged
// with a nil error, as the RoundTripper contract requires; when retrying
// stops on a retryable status, the last response is returned, its body
// unread. When retrying stops on an error, RoundTrip returns a [*Error]
// wrapping it. It never returns a response and an error together.
//
// Only what may run twice runs twice: GET, HEAD, OPTIONS, TRACE, PUT and
// DELETE; other methods, such as POST, only with an Idempotency-Key or
// X-Idempotency-Key header, or after a failure that proves the server did
// not process the request (a 429 or a rate-limit 403, an error while
// connecting, or an x-should-retry or Stripe-Should-Retry: true header).
// A request whose body cannot be rewound through GetBody is sent once,
// unless ReplayBuffer keeps it. The caller's request is never modified.
//
// Discarded responses are drained (at most 64 KiB) and closed, so their
// connections are reused. The attempt timeout ends when the response headers
// arrive: reading the body is bounded by the caller's context only.
//
// The zero Transport is ready to use: http.DefaultTransport with the default
// Policy. A Transport holds no per-request state and is safe for concurrent
// use by multiple goroutines; its fields must not change while it is in use.
type Transport struct {
	// Base sends each attempt. Nil means http.DefaultTransport. The
	// Transport never reconfigures it nor closes its idle connections.
	Base http.RoundTripper

	// Policy says how often and how long to retry. The zero Policy takes
	// the defaults.
	Policy Policy

	// Replayable decides whether a request may be sent again after a
	// failure the server may have processed: a timeout, a dropped
	// connection, a 408 or a 5xx. It must not modify the request. Nil keeps
	// the rule above: idempotent methods and requests with an idempotency
	// key. Set it to retry calls whose repetition is harmless though their
	// method is not idempotent, such as LLM text generation, where a second
	// call costs tokens but changes nothing. Failures that prove the request
	// was not processed are retried whatever it says.
	Replayable func(*http.Request) bool

	// IdempotencyKey, when set, gives each POST or PATCH that has no
	// Idempotency-Key or X-Idempotency-Key header an Idempotency-Key with
	// the value it returns, the same on every attempt of that call, and the
	// request is then retried like an idempotent one. Use it only with
	// servers that deduplicate requests by that header. NewIdempotencyKey
	// suits it. Nil means no key is added; an empty key is not sent.
	IdempotencyKey func() string

	// BodyIdleTimeout fails a response body read that waits this long for
	// a byte, with an error that wraps ErrBodyIdle and
	// context.DeadlineExceeded. Unlike a total timeout, it never cuts a
	// long stream that keeps delivering, such as server-sent events. Zero
	// means no limit.
	BodyIdleTimeout time.Duration

	// ReplayBuffer, when positive, lets a request whose body has no
	// GetBody (an upload from a file or a pipe, or an SDK's body) be sent
	// again: the Transport keeps the bytes the base reads of it, up to this
	// many, never reading ahead. The next attempt sends the kept bytes,
	// then goes on with the original body where the last attempt stopped.
	// Once a body passes the limit, it is not sent again. A body with
	// GetBody is never copied. Zero means such a body is sent once; a
	// negative value is a configuration error.
	ReplayBuffer int64

	// Stream, when set, holds back a 2xx text/event-stream response until
	// its first output, so that an error event before it is retried
	// unseen, and makes its body report an error event or a cut after it
	// (see Stream). LLMEvent describes OpenAI's and Anthropic's streams.
	// Nil means event streams are handed over like any response.
	Stream *Stream

	// Pacer, when set, spaces the attempts of every caller that shares
	// it: each attempt waits for it first, and each response teaches it
	// (see Pacer). *pace.Pacer, of package
	// github.com/retrykit/retry/pace, paces by the rate limits that
	// servers report. A Pacer with a method Validate() error is asked
	// before the first attempt: its error ends the call. Nil means no
	// pacing.
	Pacer Pacer
}

// NewTransport returns a Transport that sends attempts through base (nil:
// http.DefaultTransport) and retries by p.
func NewTransport(base http.RoundTripper, p Policy) *Transport {
	return &Transport{Base: base, Policy: p}
}

// errNilResponse reports a base RoundTripper that broke its contract.
var errNilResponse = errors.New("retry: base RoundTripper returned a nil response and a nil error")

// RoundTrip sends req, retrying it by the Transport's rules; see [Transport].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := call{t: t, req: req, body: req.Body}
	if err := c.init(); err != nil {
		closeBody(req.Body)
		return nil, err
	}
	for {
		resp, done, err := c.attempt()
		if done {
			if c.stop != nil && resp == nil {
				c.stop() // else deliver passed it to the body's release
			}
			c.rb.end(resp == nil)
			return resp, c.l.done(req, err)
		}
	}
}

// call is the state of one RoundTrip.
type call struct {
	t      *Transport
	req    *http.Request
	l      loop
	ctx    context.Context // the caller's, cancelled also by req.Cancel
	stop   func()          // ends the req.Cancel watch; nil without one
	base   http.RoundTripper
	header http.Header   // what every attempt sends
	rewind bool          // the body can be sent again
	replay bool          // the request may be sent again after it may have been processed
	body   io.ReadCloser // the body of the next attempt, not yet handed on
	rb     *replayBody   // keeps a body without GetBody for the next attempt; nil if none
	pr     Reservation   // the current attempt's place with the Pacer; nil if none
}

func (c *call) init() error {
	// Checked first: a call refused here must not deposit in a Budget.
	if c.t.BodyIdleTimeout < 0 {
		return fmt.Errorf("%w: BodyIdleTimeout is %v; it must not be negative",
			ErrInvalidPolicy, c.t.BodyIdleTimeout)
	}
	if c.t.ReplayBuffer < 0 {
		return fmt.Errorf("%w: ReplayBuffer is %d; it must not be negative", ErrInvalidPolicy, c.t.ReplayBuffer)
	}
	if c.t.Stream != nil {
		if err := c.t.Stream.validate(); err != nil {
			return err
		}
	}
	if v, ok := c.t.Pacer.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	c.ctx = c.req.Context()
	if err := c.l.init(c.ctx, &c.t.Policy); err != nil {
		return err
	}
	c.l.req = c.req
	//lint:ignore SA1019 http.Client still sets Cancel, and callers may: it is honoured, not used
	if cancel := c.req.Cancel; cancel != nil {
		if _, ok := c.ctx.Deadline(); !ok {
			c.ctx, c.stop = watchCancel(c.ctx, cancel)
			c.l.ctx = c.ctx
		}
	}
	c.base = c.t.base()
	c.rewind = rewindable(c.req)
	if c.rb = newReplay(c.req, c.t.ReplayBuffer); c.rb != nil {
		c.body, c.rewind = c.rb.start(), true
	}
	var keyed bool
	c.header, keyed = c.t.addKey(c.req)
	c.replay = c.rewind && (keyed || c.t.replayable(c.req))
	return nil
}

// watchCancel returns a context that is also cancelled when the deprecated
// Request.Cancel channel closes, and the function that ends the watch. The
// attempts never pass the channel on, or net/http would start a goroutine
// to watch it for every attempt; one per call is enough. And none when the
// request's context has a deadline: http.Client sets a Cancel whenever its
// Timeout is set and the Transport is not its own, but then it also sets
// the context's deadline to that time or sooner, so the context alone ends
// the call in time. (Request.Cancel's documentation leaves it undefined
// whether Cancel is respected when a context is set.)
func watchCancel(parent context.Context, ch <-chan struct{}) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-ch:
			cancel(errRequestCanceled)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// errRequestCanceled is the cause of a call ended by its Request.Cancel.
var errRequestCanceled = errors.New("retry: request canceled through Request.Cancel")

// attempt makes one attempt and, when another may follow, sleeps. done
// says that resp and err are the call's result.
func (c *call) attempt() (resp *http.Response, done bool, err error) {
	timeout, err := c.begin() // waits for the Pacer first
	if err != nil {
		closeBody(c.body)
		return nil, true, err
	}
	if c.l.attempt > 1 {
		if c.body, err = c.rb.nextBody(c.req); err != nil {
			c.learn(nil, err)
			return nil, true, fmt.Errorf("retry: GetBody failed before attempt %d: %w; last error: %w",
				c.l.attempt, err, c.l.last)
		}
	}
	parent := c.ctx
	var cw *connWatch
	if !c.replay {
		cw = new(connWatch)
		parent = cw.watch(parent)
	}
	x := &exchange{done: c.stop}
	areq := x.start(c.req, parent, c.l.attempt, c.body, c.header, c.l.began, timeout)
	if c.replay {
		c.rb.lend(areq)
	} else {
		// What must not run twice is sent again by the loop alone, on proof
		// it checks: net/http re-sends a request with GetBody by itself on
		// the server's word (an HTTP/2 REFUSED_STREAM or GOAWAY), which a
		// proxy may give for a stream it had forwarded. docs/proxies.md has
		// the measure of it.
		areq.GetBody = nil
	}
	c.body = nil
	if c.hedgeable() {
		resp, err = c.hedge(areq)
	} else {
		resp, err = c.base.RoundTrip(areq)
	}
	if err == nil && resp == nil {
		err = errNilResponse
	}
	// An event stream held back to its commit point is learned from there.
	held := err == nil && resp.StatusCode < 400 && c.t.Stream != nil && hasStream(c.req, resp)
	if !held {
		c.learn(resp, err)
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close() // a base that broke the contract
		}
		if x.ctx.timedOut() && !errors.Is(err, context.DeadlineExceeded) {
			err = &attemptTimeoutError{err}
		}
		x.ctx.release()
		return c.failed(err, c.replay || isConnectionError(err) || notSent(err) || cw.failedConnecting())
	}
	if resp.StatusCode < 400 {
		if held {
			return c.stream(x, resp)
		}
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	return c.status(x, resp)
}

// failed ends an attempt that returned err; resend says whether the
// request may be sent again after it.
func (c *call) failed(err error, resend bool) (*http.Response, bool, error) {
	// retire last: it ends the attempt's use of a replayed body, which only
	// a retry may do.
	sendable := c.bodyAgain() && resend
	if !sendable && c.l.ctx.Err() == nil {
		if !c.l.retryable(err) {
			return nil, true, c.l.failed(err, false)
		}
		c.skipped(err)
	}
	retry := sendable && c.l.retryable(err) && c.rb.retire()
	if err := c.l.failed(err, retry); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// status ends an attempt answered with a status of 400 or more: it hands
// the response back, or discards it and sleeps before the next attempt.
func (c *call) status(x *exchange, resp *http.Response) (*http.Response, bool, error) {
	l := &c.l
	se := &StatusError{StatusCode: resp.StatusCode, Message: statusMessage(resp.StatusCode), Response: resp}
	if se.RetryAfter = l.held; se.RetryAfter == 0 { // read once when the Pacer has read it
		se.RetryAfter = statusHint(resp, &l.p)
	}
	if !c.resendable(se) {
		c.skippedStatus(se)
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	// Custom judges may read the body; the default never does. A response
	// that came after the attempt's timeout (from a base that ignored its
	// context) has no time left to be read: it is judged without its body.
	if l.p.Retryable != nil && x.ctx.Err() == nil {
		var whole bool
		if se.Body, whole = x.peek(resp); !whole {
			x.ctx.release()
			return c.failed(&attemptTimeoutError{errPeekTimedOut}, true)
		}
	}
	return c.judge(x, resp, se)
}

// skipped records err, a failure that the rules would retry, as the last,
// and why it is not retried: the request may have been processed and may
// not run twice, or its body cannot be sent again.
func (c *call) skipped(err error) {
	c.l.last = err
	if !c.bodyAgain() {
		c.l.reason = ReasonBodyNotReplayable
	} else {
		c.l.reason = ReasonNotReplayable
	}
}

// bodyAgain reports whether the request's body can be sent again: it has
// none, or GetBody, or ReplayBuffer keeps it and it has not passed the
// limit.
func (c *call) bodyAgain() bool { return c.rewind && c.rb.replayable() }

// skippedStatus records se as skipped when the status rules would retry it
// and the caller is still waiting.
func (c *call) skippedStatus(se *StatusError) {
	if c.l.ctx.Err() == nil && se.retryable() {
		c.skipped(se)
	}
}

// resendable reports whether the replay rules let the request be sent again
// after se.
func (c *call) resendable(se *StatusError) bool {
	return c.bodyAgain() && c.l.ctx.Err() == nil && (c.replay || notProcessed(se))
}

// judge ends an attempt whose answer stands for the status se, after which
// the request may be sent again: it hands resp back, or discards it and
// sleeps before the next attempt.
func (c *call) judge(x *exchange, resp *http.Response, se *StatusError) (*http.Response, bool, error) {
	l := &c.l
	if !l.retryable(se) {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	l.last = se
	delay, hinted, stop := l.delay()
	if stop != nil {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	// The base may still be sending the body (net/http does when a server
	// answers early): from here its reads must not take the bytes the next
	// attempt replays. Retired only now, since a response handed back
	// needs its connection, which a failed upload would close. A read
	// that passes ReplayBuffer may have begun since the check above; then
	// the response is the answer, and the retry a Budget allowed is not
	// made.
	if !c.rb.retire() {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	x.discard(resp)
	x.ctx.release()
	if err := l.sleep(delay, hinted); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// errPeekTimedOut is the error of an attempt whose timeout fired while the
// start of its error body was being read for Policy.Retryable.
var errPeekTimedOut = errors.New("retry: attempt timed out reading the error body")

// addKey returns the header every attempt sends, and whether it holds an
// idempotency key added by IdempotencyKey. The caller's header map is
// never written: a key goes into a copy.
func (t *Transport) addKey(req *http.Request) (http.Header, bool) {
	if t.IdempotencyKey == nil || (req.Method != http.MethodPost && req.Method != http.MethodPatch) ||
		hasKey(req.Header) {
		return req.Header, false
	}
	key := t.IdempotencyKey()
	if key == "" {
		return req.Header, false
	}
	h := req.Header.Clone()
	if h == nil {
		h = make(http.Header, 1)
	}
	h.Set("Idempotency-Key", key)
	return h, true
}

func (t *Transport) replayable(req *http.Request) bool {
	if t.Replayable != nil {
		return t.Replayable(req)
	}
	return Idempotent(req)
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

// hasKey reports an Idempotency-Key or X-Idempotency-Key header. A key
// present with a nil value counts: net/http's convention for "idempotent,
// but send no key".
func hasKey(h http.Header) bool {
	if _, ok := h["Idempotency-Key"]; ok {
		return true
	}
	_, ok := h["X-Idempotency-Key"]
	return ok
}

// connWatch follows an attempt that may not be sent twice through net/http's
// client trace, to tell whether it failed before a connection was obtained
// for it (a DNS lookup, a dial or a TLS handshake failed). Such a request
// never reached a server, so it may be sent again. The error alone cannot
// tell: a connection reset during the TLS handshake looks like one after
// the request was sent. A base that reports no trace events is never judged
// this way.
type connWatch struct {
	getting atomic.Bool // net/http began to get a connection for the request
	gotConn atomic.Bool // and obtained one
}

// watch returns ctx with a client trace reporting to w; it adds to any trace
// ctx already has.
func (w *connWatch) watch(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { w.getting.Store(true) },
		GotConn: func(httptrace.GotConnInfo) { w.gotConn.Store(true) },
	})
}

// failedConnecting reports an attempt that ended while connecting; false
// for a nil w.
func (w *connWatch) failedConnecting() bool {
	return w != nil && w.getting.Load() && !w.gotConn.Load()
}

// notProcessed reports a status response that proves the request did not
// take effect, or that the server says may be sent again: a 429, a 403
// that is a rate limit, or an x-should-retry or Stripe-Should-Retry: true
// header.
func notProcessed(se *StatusError) bool {
	if se.StatusCode == http.StatusTooManyRequests || se.rateLimited() {
		return true
	}
	v, ok := se.shouldRetry()
	return ok && v
}

// statusMessage is StatusError.Message for code: the code and its standard
// name, never resp.Status, whose text is the server's: a server that echoes
// the request's Authorization there would put it in every error and Event.
func statusMessage(code int) string {
	switch code { // the statuses retried most, without building a string
	case http.StatusTooManyRequests:
		return "429 Too Many Requests"
	case http.StatusInternalServerError:
		return "500 Internal Server Error"
	case http.StatusBadGateway:
		return "502 Bad Gateway"
	case http.StatusServiceUnavailable:
		return "503 Service Unavailable"
	case http.StatusGatewayTimeout:
		return "504 Gateway Timeout"
	case wire.StatusOverloaded:
		return "529 Overloaded"
	}
	return strings.TrimSpace(strconv.Itoa(code) + " " + statusText(code))
}
