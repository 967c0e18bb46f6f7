package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxDrain is the most read from a discarded response before closing it. A
// body up to this size is read to its end so the connection can be reused;
// a larger one costs a new connection, which is cheaper than reading it.
const maxDrain = 64 << 10

// exchange is one attempt of a Transport in one allocation: the request
// copy that carries the attempt's context, the context, and the response
// body it delivers, which the exchange wraps to release the context.
type exchange struct {
	req  http.Request
	ctx  attemptCtx
	rc   io.ReadCloser // the delivered body; nil before deliver
	done func()        // called once the body is released; may be nil
}

// start begins attempt n of req under parent at began (zero: now), with
// timeout, and returns the copy of req it sends: body, the header every
// attempt sends, and x's context. The copy never carries req.Cancel: the
// call watches that channel itself and cancels parent, which spares
// net/http a goroutine per attempt.
func (x *exchange) start(req *http.Request, parent context.Context, n int, body io.ReadCloser, h http.Header,
	began time.Time, timeout time.Duration) *http.Request {
	x.ctx.start(parent, n, began, timeout)
	// WithContext is inlined and its copy stays on the stack: one copy
	// into x, no allocation of its own.
	x.req = *req.WithContext(&x.ctx)
	x.req.Body = body
	x.req.Header = h
	x.req.Cancel = nil //lint:ignore SA1019 cleared so that net/http does not watch it (see watchCancel)
	return &x.req
}

// maxPeek is the most of an error body read into StatusError.Body.
const maxPeek = 4 << 10

// peek reads up to maxPeek bytes of resp's body, still under the attempt
// timeout, and puts them back in front of the rest, so the body stays
// whole for whoever reads it next. It reports false when the attempt ended
// during the read (its timeout, the Deadline, or the caller's cancel): the
// body was closed then, and cannot be handed back whole.
func (x *exchange) peek(resp *http.Response) ([]byte, bool) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil, true
	}
	n := int64(maxPeek)
	if resp.ContentLength >= 0 && resp.ContentLength < n {
		n = resp.ContentLength
	}
	buf := make([]byte, n)
	x.ctx.closeOnEnd(resp.Body)
	k, err := readFull(resp.Body, buf)
	// The end may have cut the read (net/http's body fails when the
	// attempt's context ends) before it closed the body: the attempt's
	// state decides, not stopClose.
	if stopped := x.ctx.stopClose(); x.ctx.Err() != nil {
		if stopped {
			_ = resp.Body.Close()
		}
		return nil, false
	}
	resp.Body = &peekedBody{buf: buf[:k], err: err, rc: resp.Body}
	return buf[:k:k], true
}

// closeOnEnd arranges for b to be closed if the attempt ends before
// stopClose is called; b is closed at once if it is over already. A body
// read meanwhile (a drain or a peek) cannot outlast the attempt, even one
// that ignores the request's context, such as an io.Pipe fed by a stuck
// producer: closing is how the io.ReadCloser contract ends a read.
func (c *attemptCtx) closeOnEnd(b io.Closer) {
	c.mu.Lock()
	running := c.why == running
	if running {
		c.closer = b
	}
	c.mu.Unlock()
	if !running {
		_ = b.Close()
	}
}

// stopClose undoes closeOnEnd, and reports false if the body was closed.
func (c *attemptCtx) stopClose() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	set := c.closer != nil
	c.closer = nil
	return set
}

// readFull reads into buf until it is full, the body fails or ends, or
// maxEmptyReads reads in a row return nothing. It returns how much it read
// and the error that ended the reading, if any.
func readFull(r io.Reader, buf []byte) (int, error) {
	n := 0
	for empty := 0; n < len(buf) && empty < maxEmptyReads; {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
		if k == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return n, nil
}

// peekedBody replays the bytes peek read, then the error that ended the
// peek, if any, or else the rest of the body. io.Reader allows a read to
// return bytes with an error: the error must not be lost, or a body cut
// short would read as whole.
type peekedBody struct {
	buf []byte
	err error
	rc  io.ReadCloser
}

func (b *peekedBody) Read(p []byte) (int, error) {
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.rc.Read(p)
}

func (b *peekedBody) Close() error { return b.rc.Close() }

// deliver hands resp to the caller, with Transport.BodyIdleTimeout idle.
// The attempt timeout ends here; the attempt's context lives on until the
// body is closed or read to its end, because cancelling it would cut the
// body short.
func (x *exchange) deliver(resp *http.Response, idle time.Duration) *http.Response {
	x.ctx.stopTimeout()
	if resp.Body == nil || resp.Body == http.NoBody {
		x.release()
		return resp
	}
	x.rc = resp.Body
	var body io.ReadCloser = x
	if idle > 0 {
		body = &idleBody{x: x, idle: idle}
	}
	if w, ok := x.rc.(io.Writer); ok {
		// A 101 Switching Protocols body is the connection itself, which
		// the caller writes to.
		body = &writeBody{ReadCloser: body, w: w}
	}
	resp.Body = body
	return resp
}

// release ends the attempt and, with it, the call.
func (x *exchange) release() {
	x.ctx.release()
	if x.done != nil {
		x.done()
	}
}

// discard drains at most maxDrain bytes of resp's body, still under the
// attempt timeout, and closes it. It gives up on a body that keeps
// returning nothing, as bufio does, and closes a body that is still being
// read when the attempt ends.
func (x *exchange) discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	if b, ok := resp.Body.(*eventBody); ok {
		// An event stream that reported an error may stay open, sending
		// pings: draining it would wait out the attempt timeout. Its
		// connection is the price of leaving at once.
		_ = b.rc.Close()
		b.free()
		return
	}
	x.ctx.closeOnEnd(resp.Body)
	buf := drainPool.Get().(*[drainBuf]byte)
	for n := 0; n < maxDrain; {
		chunk := buf[:min(drainBuf, maxDrain-n)]
		k, _ := readFull(resp.Body, chunk)
		if k < len(chunk) {
			break // the end, an error, or a body that returns nothing
		}
		n += k
	}
	drainPool.Put(buf)
	if x.ctx.stopClose() { // else the attempt's end closed it
		_ = resp.Body.Close()
	}
}

// drainBuf is the size of discard's buffers, shared through drainPool.
const drainBuf = 8 << 10

// maxEmptyReads is how many reads in a row that return neither bytes nor an
// error discard tolerates.
const maxEmptyReads = 100

var drainPool = sync.Pool{New: func() any { return new([drainBuf]byte) }}

// Read reads the delivered body, and releases the attempt's context at its
// end, as net/http's cancelTimerBody does.
func (x *exchange) Read(p []byte) (int, error) {
	n, err := x.rc.Read(p)
	if err == io.EOF {
		x.release()
	}
	return n, err
}

// WriteTo writes the rest of the delivered body to w and releases the
// attempt's context at its end. io.Copy calls it, and the copy then takes
// whatever shortcut the body and w offer (the body's WriteTo, w's
// ReadFrom), as it would without the wrapper.
func (x *exchange) WriteTo(w io.Writer) (int64, error) {
	n, err := io.Copy(w, x.rc)
	if err == nil { // the end of the body
		x.release()
	}
	return n, err
}

// Close closes the delivered body and releases the attempt's context.
func (x *exchange) Close() error {
	err := x.rc.Close()
	x.release()
	return err
}

// idleBody is the delivered body when Transport.BodyIdleTimeout is set: a
// Read that waits idle that long for a byte ends the attempt's context,
// which cuts the read.
type idleBody struct {
	x    *exchange
	idle time.Duration

	// timer cancels the context when a Read waits idle long; made by the
	// first Read. Reads are not concurrent (io.Reader), so only Read
	// touches it.
	timer   *time.Timer
	idled   atomic.Bool // the timer fired
	running atomic.Bool // a Read is waiting; only then may the timer cancel
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.running.Store(true)
	if b.timer == nil {
		b.timer = time.AfterFunc(b.idle, b.fire)
	} else {
		b.timer.Reset(b.idle)
	}
	n, err := b.x.Read(p)
	b.running.Store(false)
	b.timer.Stop()
	if err != nil && b.idled.Load() {
		return n, &bodyIdleError{b.idle}
	}
	return n, err
}

// fire ends the attempt when a Read has waited the whole idle timeout; the
// read then fails and Read reports a bodyIdleError.
func (b *idleBody) fire() {
	if b.running.Load() {
		b.idled.Store(true)
		b.x.ctx.end(idled)
	}
}

// Close closes the body and ends the attempt. It leaves the idle timer to
// Read, which stops it when the read that Close interrupts returns: the
// timer belongs to Read, and Close may run in another goroutine.
func (b *idleBody) Close() error { return b.x.Close() }

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

// writeBody keeps the io.Writer of a body that has one.
type writeBody struct {
	io.ReadCloser
	w io.Writer
}

func (b *writeBody) Write(p []byte) (int, error) { return b.w.Write(p) }

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
