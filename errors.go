package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/retrykit/retry/internal/wire"
)

// ErrInvalidPolicy is wrapped by the error that [Do] and [Transport.RoundTrip]
// return, before any attempt, for a [Policy] with a negative field or another
// value that cannot be used.
var ErrInvalidPolicy = errors.New("retry: invalid policy")

// errNilFunc is returned by Do for a nil function.
var errNilFunc = errors.New("retry: Do called with a nil function")

// StatusError is an HTTP response with a status of 400 or more, seen as an
// error so that a [Policy] can judge it.
//
// The [Transport] makes one for every such response and hands it to
// Policy.Retryable; code that calls an HTTP API through [Do] may return one
// from its function to get the same treatment, Retry-After included.
type StatusError struct {
	StatusCode int            // the HTTP status code, such as 503
	RetryAfter time.Duration  // the server's hint (Retry-After, retry-after-ms, or a spent rate limit's reset); 0 when it sent none
	Message    string         // the code and its standard name, such as "503 Service Unavailable"; never the server's own text
	Response   *http.Response // set by Transport; its body is unread

	// Body holds the start of the response body, at most 4 KiB, for a
	// Policy.Retryable that decides by it (LLMRetryable does). The
	// Transport fills it only when Policy.Retryable is set, and the body of
	// Response still reads whole from its first byte.
	Body []byte
}

// Error reports the status, never a header or a body.
func (e *StatusError) Error() string {
	msg := strings.TrimSpace(e.Message)
	if msg == "" || msg == strconv.Itoa(e.StatusCode) {
		msg = strconv.Itoa(e.StatusCode)
		if t := statusText(e.StatusCode); t != "" {
			msg += " " + t
		}
	}
	return "retry: HTTP " + msg
}

// statusText is http.StatusText, knowing also the statuses LLM APIs add.
func statusText(code int) string {
	if code == wire.StatusOverloaded {
		return "Overloaded"
	}
	return http.StatusText(code)
}

// retryable applies the status rule of [IsRetryable]: the server's own
// word (x-should-retry, Stripe-Should-Retry), when present, takes
// precedence; a 403 is retried only when it is a rate limit.
func (e *StatusError) retryable() bool {
	if v, ok := e.shouldRetry(); ok {
		return v
	}
	if e.StatusCode == http.StatusForbidden {
		return e.rateLimited()
	}
	return retryableStatus(e.StatusCode)
}

// retryableStatus: 408, 429 and 5xx, except 501 Not Implemented and 505 HTTP
// Version Not Supported, which fail the same way every time.
func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return true
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code <= 599
}

// Reason says why retrying stopped without success.
type Reason string

const (
	// ReasonMaxAttempts: the last allowed attempt failed.
	ReasonMaxAttempts Reason = "max_attempts"
	// ReasonDeadline: no time was left for another attempt within the
	// Policy's Deadline or the caller's context deadline.
	ReasonDeadline Reason = "deadline"
	// ReasonBudget: the Policy's retry Budget refused another retry.
	ReasonBudget Reason = "budget"
	// ReasonNotReplayable: a Transport did not send the request again
	// after a failure the rules retry (a 5xx, a timeout, a dropped
	// connection), because the server may have processed it and it may
	// not run twice: a POST or PATCH without an idempotency key that
	// Transport.Replayable does not allow. The call returns the failure
	// as it came; Outcome.Reason says why it was not retried.
	ReasonNotReplayable Reason = "not_replayable"
	// ReasonBodyNotReplayable: a Transport did not send the request again
	// after a failure the rules retry, because its body cannot be sent
	// again: it has no GetBody, and ReplayBuffer did not keep it (unset,
	// or the body passed it). Outcome only, as ReasonNotReplayable.
	ReasonBodyNotReplayable Reason = "body_not_replayable"
)

// Error is returned when retrying stops without success: the attempts or the
// time ran out. Err is the last attempt's error, and [errors.Is] and
// [errors.As] see through Error to it.
type Error struct {
	Reason   Reason // why retrying stopped
	Attempts int    // calls to fn that were made
	Err      error  // the last attempt's error; nil if none was made
}

// Error reports the reason, the attempts and the last error.
func (e *Error) Error() string {
	s := "retry: gave up after " + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	s += " (" + string(e.Reason) + ")"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports a call that gave up on time: its Deadline came, or its
// last attempt timed out (the attempt timeout, a [net.Error] that timed
// out, [context.DeadlineExceeded]). It makes *Error a timeout to those who
// ask as net/http's callers do: (*url.Error).Timeout asserts its error's
// type rather than unwrapping it, so without this method a call through an
// http.Client that gave up after attempts that timed out would not look
// like one, where a plain http.Transport's error does.
func (e *Error) Timeout() bool {
	if e.Reason == ReasonDeadline || errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	if _, ok := errors.AsType[*attemptTimeoutError](e.Err); ok {
		return true
	}
	ne, ok := errors.AsType[net.Error](e.Err)
	return ok && ne.Timeout()
}

// IsRetryable reports whether err may pass on a second try. It is the
// default Policy.Retryable.
//
// It is true for an attempt's own timeout ([context.DeadlineExceeded]; the
// loop checks first that the caller's context is alive), a [net.Error] that
// timed out, a dropped or refused connection (ECONNRESET, ECONNREFUSED,
// ECONNABORTED, EPIPE, [net.ErrClosed], [io.ErrUnexpectedEOF], [io.EOF], an
// HTTP/2 stream reset with INTERNAL_ERROR, REFUSED_STREAM or CANCEL, an
// HTTP/2 GOAWAY, a pooled connection the server had closed, a connection
// broken inside the response's status line or headers), a failed dial or a
// temporary DNS failure, and a [*StatusError] with status 408, 429 or 5xx
// other than 501 and 505, or a 403 that is a rate limit, or a [*StreamError]
// whose status is one of those. A response header
// x-should-retry (sent by OpenAI and Anthropic) or Stripe-Should-Retry
// (Stripe), true or false, overrides the status rule; when the two
// disagree, false wins.
//
// A 403 is a rate limit, as GitHub sends them, when its response (read
// through StatusError.Response) has a valid Retry-After or retry-after-ms
// header, 0 included, or x-ratelimit-remaining: 0, or when the StatusError
// carries a RetryAfter hint. Every other 403 is final. The Transport takes
// the time until x-ratelimit-reset (Unix seconds) as the RetryAfter of a
// 403 or 429 whose limit is spent and that has no valid Retry-After or
// retry-after-ms.
//
// Any [io.EOF] counts as a dropped connection: net/http reports a server
// that closed a reused connection that way, and the error keeps no trace of
// whether the connection was reused. A function given to [Do] whose io.EOF
// means something else should return another error, or judge its errors
// with its own Policy.Retryable.
//
// It is false for everything else: other 4xx statuses, [context.Canceled],
// TLS certificate errors, a bad URL or scheme, redirect loops, and any error
// it does not know.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if se, ok := err.(*StatusError); ok { // the Transport's own, unwrapped: the common case
		return se.retryable()
	}
	if _, ok := errors.AsType[*attemptTimeoutError](err); ok {
		return true // the attempt's own timeout, whatever the base made of it
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if se, ok := errors.AsType[*StatusError](err); ok {
		return se.retryable()
	}
	if se, ok := errors.AsType[*StreamError](err); ok {
		return retryableStatus(se.Status)
	}
	if isCertificateError(err) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if isConnectionError(err) || isStreamReset(err) || notSent(err) || isGoAway(err) || brokenConn(err) {
		return true
	}
	// net.ErrClosed: net/http closes a connection when its read side sees
	// a reset, and a request still writing its body then fails with "use of
	// closed network connection" instead of ECONNRESET.
	return errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF)
}

// isConnectionError reports an error raised while establishing the
// connection (DNS, dial, a refused connection), before any byte of the
// request could reach the server. Such a request was certainly not
// processed, so even a POST may be sent again. A certificate error is not
// one: it will fail the same way again.
func isConnectionError(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if de, ok := errors.AsType[*net.DNSError](err); ok {
		return de.IsTemporary || de.IsTimeout
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		return oe.Op == "dial" && !isCertificateError(err)
	}
	return false
}

// h2StreamError has the shape of net/http's HTTP/2 stream error, which
// fills in any struct of that shape for errors.As (net/http's h2_error.go,
// kept for golang.org/x/net/http2.StreamError), so it is recognised
// without a dependency.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

// isStreamReset reports a server that reset an HTTP/2 stream, the HTTP/2
// form of a dropped connection: INTERNAL_ERROR, REFUSED_STREAM or CANCEL
// (RFC 9113, section 7).
func isStreamReset(err error) bool {
	var se h2StreamError
	if !errors.As(err, &se) {
		return false
	}
	return se.Code == 0x2 || se.Code == 0x7 || se.Code == 0x8
}

// The errors below are net/http's, which it exports neither as values nor
// as types: errServerClosedIdle and the HTTP/2 transport's GOAWAY errors are
// made by errors.New, and the HTTP/1 wrapper of a broken connection by
// fmt.Errorf, so their text is all that tells them apart. Each is matched
// whole (or, for the wrapper, by the prefix only it has) on one error of the
// chain, never on a message that merely contains it. The GOAWAY error that
// carries a stream id is a struct, and is matched by its shape, as
// h2StreamError is.
const (
	// A server (or proxy) closed a connection net/http had taken from its
	// pool for the request, before the request was handed to it: net/http
	// re-sends it itself only when it is idempotent (golang/go#19943).
	errTextServerClosedIdle = "http: server closed idle connection"
	// The HTTP/2 server's GOAWAY named a last stream below the request's:
	// the server says it did not, and will not, process the request.
	errTextGoAwayAbove   = "http2: Transport received Server's graceful shutdown GOAWAY"
	errPrefixGoAwayFirst = "http2: Transport received GOAWAY from server ErrCode:"
	// The HTTP/1 connection broke while the response was read: a malformed
	// status line or header, or a cut inside them.
	errPrefixBrokenConn = "net/http: HTTP/1.x transport connection broken: "
)

// notSent reports an error that proves the request never reached a server
// that could process it: a pooled connection the server had closed, or an
// HTTP/2 stream above the last one a GOAWAY named. Such a request may be
// sent again whatever its method.
func notSent(err error) bool {
	return walkErrors(err, 0, func(e error) bool {
		switch msg := e.Error(); {
		case msg == errTextServerClosedIdle, msg == errTextGoAwayAbove:
			return true
		case strings.HasPrefix(msg, errPrefixGoAwayFirst):
			return true
		}
		return false
	})
}

// isGoAway reports an HTTP/2 connection that the server closed after a
// GOAWAY, with the request's stream at or below the last stream it named:
// the server may have processed it, or not. It is a dropped connection,
// retried like one: only what may run twice. The error has the shape of
// net/http's http2GoAwayError (and of golang.org/x/net/http2.GoAwayError).
func isGoAway(err error) bool {
	return walkErrors(err, 0, func(e error) bool {
		t := reflect.TypeOf(e)
		if t.Kind() != reflect.Struct || !strings.HasSuffix(t.Name(), "GoAwayError") {
			return false
		}
		f, ok := t.FieldByName("LastStreamID")
		return ok && f.Type.Kind() == reflect.Uint32
	})
}

// brokenConn reports an HTTP/1 connection that broke after the request was
// (at least in part) written, wherever in the response: a dropped
// connection, retried like one.
func brokenConn(err error) bool {
	return walkErrors(err, 0, func(e error) bool {
		return strings.HasPrefix(e.Error(), errPrefixBrokenConn)
	})
}

// walkErrors calls f on err and the errors it wraps, depth first, until f
// reports true; it reports whether f did. A chain deeper than 64 is cut.
func walkErrors(err error, depth int, f func(error) bool) bool {
	for ; err != nil && depth < 64; depth++ {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walkErrors(e, depth+1, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// isCertificateError reports TLS verification failures, which repeat on
// every try.
func isCertificateError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}
