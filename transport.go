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
// not process the request (a 429, an error while connecting, or an
// x-should-retry: true header). A request whose body cannot be rewound
// through GetBody is sent once. The caller's request is never modified.
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

	// Pacer, when set, spaces the attempts of every caller that shares it
	// by the rate limits its servers report (see Pacer): each attempt
	// waits for it first, and each response teaches it. Nil means no
	// pacing.
	Pacer *Pacer
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
			if c.x != nil {
				c.x.ctx.release()
			}
			return resp, err
		}
	}
}

// call is the state of one RoundTrip.
type call struct {
	t      *Transport
	req    *http.Request
	l      loop
	base   http.RoundTripper
	header http.Header   // what every attempt sends
	rewind bool          // the body can be sent again
	replay bool          // the request may be sent again after it may have been processed
	body   io.ReadCloser // the body of the next attempt, not yet handed on
	reuse  bool          // an attempt that ends without cancelling may be followed on its exchange
	x      *exchange     // kept for the next attempt; released if none follows
	spare  *StatusError  // the error of a status retried, which no caller has seen: reusable
	pt     paceTicket    // the current attempt's reservation with the Pacer
}

func (c *call) init() error {
	// Checked first: a call refused here must not deposit in a Budget.
	if c.t.BodyIdleTimeout < 0 {
		return fmt.Errorf("%w: BodyIdleTimeout is %v; it must not be negative",
			ErrInvalidPolicy, c.t.BodyIdleTimeout)
	}
	if err := c.l.init(c.req.Context(), &c.t.Policy); err != nil {
		return err
	}
	c.base = c.t.base()
	c.rewind = rewindable(c.req)
	var keyed bool
	c.header, keyed = c.t.addKey(c.req)
	c.replay = c.rewind && (keyed || c.t.replayable(c.req))
	// The next attempt may send the same request copy, under the same
	// context rearmed, when nothing in it changes (no body to rewind, no
	// connection trace to reset) and nothing watched the context (see
	// attemptCtx.rearm). Only readers share the copy then.
	c.reuse = c.replay && (c.req.Body == nil || c.req.Body == http.NoBody)
	return nil
}

// attempt makes one attempt and, when another may follow, sleeps. done
// says that resp and err are the call's result.
func (c *call) attempt() (resp *http.Response, done bool, err error) {
	x := c.x
	c.x = nil
	timeout, err := c.begin() // waits for the Pacer first
	if err != nil {
		if x != nil {
			x.ctx.release()
		}
		closeBody(c.body)
		return nil, true, err
	}
	var areq *http.Request
	var cw *connWatch
	if x != nil && !x.ctx.rearm(c.l.began, timeout) {
		x.ctx.release() // watched: it ends before the next attempt begins
		x = nil
	}
	if x != nil {
		areq = &x.req
	} else {
		if c.l.attempt > 1 {
			if c.body, err = nextBody(c.req); err != nil {
				c.learn(nil, err)
				return nil, true, fmt.Errorf("retry: GetBody failed before attempt %d: %w; last error: %w",
					c.l.attempt, err, c.l.last)
			}
		}
		parent := c.req.Context()
		if !c.replay {
			cw = new(connWatch)
			parent = cw.watch(parent)
		}
		x = new(exchange)
		areq = x.start(c.req, parent, c.body, c.header, c.l.began, timeout)
		c.body = nil
	}
	resp, err = c.base.RoundTrip(areq)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	c.learn(resp, err)
	if err != nil {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close() // a base that broke the contract
		}
		if x.ctx.timedOut() && !errors.Is(err, context.DeadlineExceeded) {
			err = &attemptTimeoutError{err}
		}
		x.ctx.release()
		return c.failed(err, c.replay || isConnectionError(err) || cw.failedConnecting())
	}
	if resp.StatusCode < 400 {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	return c.status(x, resp)
}

// failed ends an attempt that returned err; resend says whether the
// request may be sent again after it.
func (c *call) failed(err error, resend bool) (*http.Response, bool, error) {
	if err := c.l.failed(err, c.rewind && resend && c.l.retryable(err)); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// status ends an attempt answered with a status of 400 or more: it hands
// the response back, or discards it and sleeps before the next attempt.
func (c *call) status(x *exchange, resp *http.Response) (*http.Response, bool, error) {
	l := &c.l
	se := c.spare
	c.spare = nil
	if se == nil {
		se = new(StatusError)
	}
	*se = StatusError{StatusCode: resp.StatusCode, Message: statusMessage(resp.StatusCode), Response: resp}
	if hasRetryAfter(resp.Header) { // spares a clock reading
		se.RetryAfter, _ = ParseRetryAfter(resp.Header, l.p.now())
	}
	if !c.rewind || l.ctx.Err() != nil || !(c.replay || notProcessed(se)) {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	if l.p.Retryable != nil { // custom judges may read the body; the default never does
		if se.Body = x.peek(resp); x.ctx.cut() {
			// The attempt timed out during the peek, which cut the body:
			// the response cannot be handed back whole. (Nothing can cut
			// a body read under a context nobody watches; such a response
			// that merely came late is judged like any other.)
			_ = resp.Body.Close()
			x.ctx.release()
			return c.failed(&attemptTimeoutError{errPeekTimedOut}, true)
		}
	}
	if !l.retryable(se) {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	l.last = se
	if l.p.Retryable == nil && l.p.OnRetry == nil {
		// No code outside the call has seen se, nor will, unless the call
		// ends wrapping it: the next status may take it over.
		c.spare = se
	}
	delay, hinted, stop := l.delay()
	if stop != nil {
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	discard(resp)
	if c.reuse && x.ctx.stopTimeout() && x.ctx.unwatched() {
		c.x = x // the next attempt rearms it; RoundTrip releases it if none comes
	} else {
		x.ctx.release()
	}
	if err := l.sleep(delay, hinted); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// hasRetryAfter reports whether h holds a header ParseRetryAfter reads.
func hasRetryAfter(h http.Header) bool {
	return len(h["Retry-After-Ms"]) > 0 || len(h["Retry-After"]) > 0
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
	return idempotent(req)
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

// idempotent reports whether req may be sent again after a failure the
// server may have processed: its method is idempotent (RFC 9110, section
// 9.2.2), or it carries an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return hasKey(req.Header)
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
// take effect, or that the server says may be sent again: a 429, or an
// x-should-retry: true header.
func notProcessed(se *StatusError) bool {
	if se.StatusCode == http.StatusTooManyRequests {
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
	case 529:
		return "529 Overloaded"
	}
	return strings.TrimSpace(strconv.Itoa(code) + " " + statusText(code))
}
