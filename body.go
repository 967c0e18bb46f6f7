package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// maxDrain is the most read from a discarded response before closing it. A
// body up to this size is read to its end so the connection can be reused;
// a larger one costs a new connection, which is cheaper than reading it.
const maxDrain = 64 << 10

// exchange is one attempt of a Transport: its context, the wrapper that ties
// the context to the returned body, and the reader that drains a discarded
// body, in one allocation.
type exchange struct {
	ctx   attemptCtx
	body  boundBody
	drain io.LimitedReader
	idle  time.Duration // Transport.BodyIdleTimeout
}

// maxPeek is the most of an error body read into StatusError.Body.
const maxPeek = 4 << 10

// peek reads up to maxPeek bytes of resp's body, still under the attempt
// timeout, and puts them back in front of the rest, so the body stays
// whole for whoever reads it next.
func (x *exchange) peek(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	n := int64(maxPeek)
	if resp.ContentLength >= 0 && resp.ContentLength < n {
		n = resp.ContentLength
	}
	buf := make([]byte, n)
	k, _ := io.ReadFull(resp.Body, buf)
	resp.Body = &peekedBody{buf: buf[:k], rc: resp.Body} // rare: not worth a field of every exchange
	return buf[:k:k]
}

// peekedBody replays the bytes peek read, then the rest of the body. An
// error met while peeking is met again by the next read of the rest.
type peekedBody struct {
	buf []byte
	rc  io.ReadCloser
}

func (b *peekedBody) Read(p []byte) (int, error) {
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	return b.rc.Read(p)
}

func (b *peekedBody) Close() error { return b.rc.Close() }

// deliver hands resp to the caller. The attempt timeout ends here; the
// attempt's context lives on until the body is closed or read to its end,
// because cancelling it would cut the body short.
func (x *exchange) deliver(resp *http.Response) *http.Response {
	x.ctx.stopTimeout()
	if resp.Body == nil || resp.Body == http.NoBody {
		x.ctx.release()
		return resp
	}
	x.body = boundBody{rc: resp.Body, ctx: &x.ctx, idle: x.idle}
	if w, ok := resp.Body.(io.Writer); ok {
		// A 101 Switching Protocols body is the connection itself, which
		// the caller writes to.
		resp.Body = &boundWriteBody{boundBody: &x.body, w: w}
	} else {
		resp.Body = &x.body
	}
	return resp
}

// discard drains at most maxDrain bytes of resp's body, still under the
// attempt timeout, closes it and ends the attempt.
func (x *exchange) discard(resp *http.Response) {
	if resp.Body != nil {
		x.drain = io.LimitedReader{R: resp.Body, N: maxDrain}
		_, _ = io.Copy(io.Discard, &x.drain)
		_ = resp.Body.Close()
		x.drain.R = nil
	}
	x.ctx.release()
}

// boundBody is the returned response body: it releases the attempt's
// context on Close or at EOF, as net/http's cancelTimerBody does, and
// enforces Transport.BodyIdleTimeout.
type boundBody struct {
	rc   io.ReadCloser
	ctx  *attemptCtx
	idle time.Duration // 0: no idle limit

	// timer cancels ctx when a Read waits idle long; made by the first
	// Read. Reads are not concurrent (io.Reader), so only Read touches it.
	timer   *time.Timer
	idled   atomic.Bool // the timer fired
	running atomic.Bool // a Read is waiting; only then may the timer cancel
}

func (b *boundBody) Read(p []byte) (int, error) {
	if b.idle > 0 {
		b.arm()
	}
	n, err := b.rc.Read(p)
	if b.idle > 0 {
		b.running.Store(false)
		b.timer.Stop()
		if err != nil && b.idled.Load() {
			return n, &bodyIdleError{b.idle}
		}
	}
	if err == io.EOF {
		b.ctx.release()
	}
	return n, err
}

// arm starts the idle timer for one Read.
func (b *boundBody) arm() {
	b.running.Store(true)
	if b.timer == nil {
		b.timer = time.AfterFunc(b.idle, b.fire)
		return
	}
	b.timer.Reset(b.idle)
}

// fire ends the attempt when a Read has waited the whole idle timeout; the
// read then fails and Read reports a bodyIdleError.
func (b *boundBody) fire() {
	if b.running.Load() {
		b.idled.Store(true)
		b.ctx.cancel(context.DeadlineExceeded)
	}
}

// Close closes the body and ends the attempt. It leaves the idle timer to
// Read, which stops it when the read that Close interrupts returns: the
// timer belongs to Read, and Close may run in another goroutine.
func (b *boundBody) Close() error {
	err := b.rc.Close()
	b.ctx.release()
	return err
}

// ErrBodyIdle is wrapped by the error a response body read returns when it
// waited longer than Transport.BodyIdleTimeout for a byte. That error also
// matches context.DeadlineExceeded and is a net.Error whose Timeout is
// true.
var ErrBodyIdle = errors.New("retry: response body idle")

type bodyIdleError struct{ idle time.Duration }

func (e *bodyIdleError) Error() string {
	return "retry: response body idle for " + e.idle.String()
}
func (e *bodyIdleError) Unwrap() []error { return []error{ErrBodyIdle, context.DeadlineExceeded} }
func (e *bodyIdleError) Timeout() bool   { return true }
func (e *bodyIdleError) Temporary() bool { return false }

// boundWriteBody keeps the io.Writer of a body that has one.
type boundWriteBody struct {
	*boundBody
	w io.Writer
}

func (b *boundWriteBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// rewindable reports whether req can be sent again: it has no body, or a
// GetBody to take a fresh copy from. A body without GetBody is sent once.
func rewindable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// nextBody returns the body for a repeated attempt of req.
func nextBody(req *http.Request) (io.ReadCloser, error) {
	if req.GetBody == nil {
		return req.Body, nil // nil or http.NoBody: nothing to rewind
	}
	return req.GetBody()
}

// closeBody closes a request body that no attempt will send, as the
// RoundTripper contract requires.
func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

// attemptTimeoutError marks the error of an attempt cut by its own timeout
// when the base RoundTripper reported something else, so that it is judged
// as the timeout it was. Both the base's error and
// context.DeadlineExceeded are in its chain.
type attemptTimeoutError struct{ err error }

func (e *attemptTimeoutError) Error() string   { return "retry: attempt timed out: " + e.err.Error() }
func (e *attemptTimeoutError) Unwrap() []error { return []error{context.DeadlineExceeded, e.err} }
func (e *attemptTimeoutError) Timeout() bool   { return true }
func (e *attemptTimeoutError) Temporary() bool { return false }
