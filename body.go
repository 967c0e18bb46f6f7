package retry

import (
	"context"
	"io"
	"net/http"
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
}

// deliver hands resp to the caller. The attempt timeout ends here; the
// attempt's context lives on until the body is closed or read to its end,
// because cancelling it would cut the body short.
func (x *exchange) deliver(resp *http.Response) *http.Response {
	x.ctx.stopTimeout()
	if resp.Body == nil || resp.Body == http.NoBody {
		x.ctx.release()
		return resp
	}
	x.body = boundBody{rc: resp.Body, ctx: &x.ctx}
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
// context on Close or at EOF, as net/http's cancelTimerBody does.
type boundBody struct {
	rc  io.ReadCloser
	ctx *attemptCtx
}

func (b *boundBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.ctx.release()
	}
	return n, err
}

func (b *boundBody) Close() error {
	err := b.rc.Close()
	b.ctx.release()
	return err
}

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
// as the timeout it was.
type attemptTimeoutError struct{ err error }

func (e *attemptTimeoutError) Error() string { return "retry: attempt timed out: " + e.err.Error() }
func (e *attemptTimeoutError) Unwrap() error { return context.DeadlineExceeded }
func (e *attemptTimeoutError) Timeout() bool { return true }
