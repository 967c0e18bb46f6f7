package retry

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// A request body without GetBody (an upload from a file or a pipe, the body
// most SDKs hand net/http) can be sent once only, unless the Transport keeps
// what the base reads of it: Transport.ReplayBuffer. The bytes are kept as
// the base reads them, never read ahead; the next attempt sends them again
// and then goes on with the original body where the last attempt stopped,
// so an upload cut halfway holds only its first half in memory.

const (
	// minReplayChunk and maxReplayChunk bound the chunks a replayBody keeps
	// bytes in; chunks, unlike one growing slice, are never copied as they
	// grow. A new chunk is a quarter of what is kept when the length is
	// known, since the last chunk is cut to fit it, and an eighth when it is
	// not, so that at most about an eighth is wasted. Sizes are multiples of
	// replayPage, which the Go allocator serves without rounding up.
	minReplayChunk = 8 << 10
	maxReplayChunk = 4 << 20
	replayPage     = 8 << 10
)

var (
	// errReplayOverflow ends a call whose next attempt needs bytes that
	// were dropped because the body passed Transport.ReplayBuffer.
	errReplayOverflow = errors.New("retry: request body passed Transport.ReplayBuffer; it cannot be sent again")

	// errReplaySuperseded is what an earlier attempt reads once a later
	// attempt has taken the body over: its exchange is over, and the bytes
	// it would take belong to the later one.
	errReplaySuperseded = errors.New("retry: request body taken over by a later attempt")
)

// replayBody is the shared state of one call's body without GetBody: the
// original body and the bytes read of it so far. Each attempt reads it
// through its own replayView.
type replayBody struct {
	src   io.ReadCloser
	limit int64 // Transport.ReplayBuffer
	size  int64 // the request's ContentLength when positive; else 0

	cur    atomic.Pointer[replayView] // the latest attempt's view; the others are retired
	over   atomic.Bool                // the body passed limit: the kept bytes are dropped
	broken atomic.Bool                // src failed with an error other than io.EOF

	// mu protects the fields below. It is held across src.Read, so that
	// the bytes reach the kept chunks in order, but never by next, Close or
	// end: a read that blocks must not block the call.
	mu       sync.Mutex
	chunks   [][]byte  // the kept bytes; every chunk full but the last
	first    [8][]byte // the first chunks' headers, saving small allocations
	consumed int64     // bytes read from src
	srcErr   error     // src's last error, io.EOF included; read again by every view

	// closeMu protects ended and crossing, and orders retire with a read
	// that may pass limit. It is never held during a read.
	closeMu  sync.Mutex
	ended    bool      // the call returned
	crossing bool      // a read that may pass limit is under way
	once     sync.Once // closes src
}

// newReplay returns the replayBody for req, or nil when none is needed: its
// body is absent or has GetBody, or limit is not positive.
func newReplay(req *http.Request, limit int64) *replayBody {
	if limit <= 0 || rewindable(req) {
		return nil
	}
	rb := &replayBody{src: req.Body, limit: limit, size: max(req.ContentLength, 0)}
	rb.chunks = rb.first[:0]
	return rb
}

// start returns the first attempt's body.
func (rb *replayBody) start() io.ReadCloser {
	v := &replayView{rb: rb}
	rb.cur.Store(v)
	return v
}

// retire ends the last attempt's use of the body once the call has decided
// to send it again, and reports whether it can be sent again. net/http
// keeps reading a request body after the response has come (its write
// loop sends the upload while the server answers early), and the old
// attempt's reads during the backoff would read on from the original body
// and pass limit, spoiling the replay. Once retired, they fail and take
// nothing. It reports false, and retires nothing, when the body cannot be
// sent again: it passed limit or failed, or a read that may pass limit is
// under way; the call then hands back the response it has. It never
// blocks on a read. Nil-safe: true.
func (rb *replayBody) retire() bool {
	if rb == nil {
		return true
	}
	rb.closeMu.Lock()
	defer rb.closeMu.Unlock()
	if rb.crossing || !rb.replayable() {
		return false
	}
	rb.cur.Store(nil)
	return true
}

// next returns the body of the next attempt and retires the earlier
// attempts' views. It never blocks, even while a retired attempt is still
// waiting in a read of the original body.
func (rb *replayBody) next() (io.ReadCloser, error) {
	if rb.over.Load() {
		return nil, errReplayOverflow
	}
	return rb.start(), nil
}

// nextBody returns the body for a repeated attempt of req: a fresh view of
// rb, or, when rb is nil, the body net/http's GetBody gives.
func (rb *replayBody) nextBody(req *http.Request) (io.ReadCloser, error) {
	if rb == nil {
		return nextBody(req)
	}
	return rb.next()
}

// lend gives the attempt's request areq a GetBody that returns a fresh
// view, so that net/http can re-send it within the attempt where it would
// re-send a body with GetBody: HTTP/2 after a refused stream or a GOAWAY,
// HTTP/1.1 after a reused connection failed before any response. Without
// it, net/http fails such an attempt with an error that hides its cause.
// Nil-safe.
func (rb *replayBody) lend(areq *http.Request) {
	if rb != nil {
		areq.GetBody = rb.next
	}
}

// replayable reports whether the body can still be sent again: it has not
// passed the limit and has not failed. True for a nil rb, whose request
// decides by GetBody alone.
func (rb *replayBody) replayable() bool {
	return rb == nil || !rb.over.Load() && !rb.broken.Load()
}

// end marks the call's return; failed says it returned no response. The
// original body is closed now if no attempt may still be sending it: after
// a failure, or once the last attempt's body is closed. Otherwise the base
// closes the last view when it is done with the body (a server may answer
// before the upload ends), and that closes the original. Nil-safe.
func (rb *replayBody) end(failed bool) {
	if rb == nil {
		return
	}
	rb.closeMu.Lock()
	rb.ended = true
	v := rb.cur.Load()
	now := failed || v == nil || v.closed.Load()
	rb.closeMu.Unlock()
	if now {
		rb.closeSrc()
	}
}

// closeSrc closes the original body, once, as the RoundTripper contract
// requires. It may interrupt a read of a retired attempt: that is how a
// read blocked on a pipe ends.
func (rb *replayBody) closeSrc() {
	rb.once.Do(func() { _ = rb.src.Close() })
}

// keep appends b, just read from src, to the kept bytes, or drops them all
// once the body passes the limit. The caller holds mu.
func (rb *replayBody) keep(b []byte) {
	if len(b) == 0 || rb.over.Load() {
		return
	}
	kept := rb.consumed - int64(len(b))
	if int64(len(b)) > rb.limit-kept {
		rb.over.Store(true)
		rb.chunks, rb.first = nil, [8][]byte{} // let the memory go
		return
	}
	for len(b) > 0 {
		i := len(rb.chunks) - 1
		if i < 0 || len(rb.chunks[i]) == cap(rb.chunks[i]) {
			rb.chunks = append(rb.chunks, make([]byte, 0, rb.chunkSize(kept)))
			i++
		}
		c := rb.chunks[i]
		n := min(len(b), cap(c)-len(c))
		rb.chunks[i] = append(c, b[:n]...)
		b, kept = b[n:], kept+int64(n)
	}
}

// chunkSize is the capacity of a new chunk after kept bytes (see
// minReplayChunk), never past the limit or a known length.
func (rb *replayBody) chunkSize(kept int64) int {
	grow := kept / 8
	if rb.size > kept {
		grow = kept / 4
	}
	n := min(max(grow, minReplayChunk), maxReplayChunk)
	n = (n + replayPage - 1) / replayPage * replayPage
	n = min(n, rb.limit-kept)
	if rb.size > kept {
		n = min(n, rb.size-kept)
	}
	return int(max(n, 1))
}

// replayView is one attempt's body: the kept bytes, then the rest of the
// original body, whose bytes it keeps in turn.
type replayView struct {
	rb     *replayBody
	pos    int64       // bytes this view returned; rb.mu protects it, ci and off
	ci     int         // the chunk holding the byte at pos, while pos < consumed
	off    int         // and its offset in that chunk
	closed atomic.Bool // Close was called
}

// Read returns kept bytes first, then reads on from the original body.
func (v *replayView) Read(p []byte) (int, error) {
	if v.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	rb := v.rb
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.cur.Load() != v {
		return 0, errReplaySuperseded
	}
	if v.pos < rb.consumed {
		if rb.over.Load() {
			// A retired attempt's late read passed the limit after this
			// attempt began: the bytes it needs are gone.
			return 0, errReplayOverflow
		}
		return v.readKept(p), nil
	}
	if rb.srcErr != nil {
		return 0, rb.srcErr
	}
	if len(p) == 0 {
		return 0, nil
	}
	crossing := false
	if !rb.over.Load() {
		if room := rb.limit - rb.consumed; room > 0 {
			// A read that starts below the limit stops at it, so that
			// only a read at the limit, which retire knows of, can pass
			// it.
			p = p[:min(int64(len(p)), room)]
		} else if crossing = v.beginCrossing(); !crossing {
			return 0, errReplaySuperseded
		}
	}
	n, err := rb.src.Read(p)
	if n < 0 || n > len(p) { // a broken reader: keep nothing false
		n, err = 0, io.ErrShortBuffer
	}
	rb.consumed += int64(n)
	rb.keep(p[:n])
	v.pos = rb.consumed
	v.ci, v.off = len(rb.chunks), 0 // past the kept chunks; only a new view reads them
	if err != nil {
		rb.srcErr = err
		if err != io.EOF {
			rb.broken.Store(true) // it would fail the same way again
		}
	}
	if crossing { // after over and broken are set, for retire to see them
		rb.closeMu.Lock()
		rb.crossing = false
		rb.closeMu.Unlock()
	}
	return n, err
}

// beginCrossing marks a read that may pass the limit as under way, unless
// v was retired. The caller holds rb.mu.
func (v *replayView) beginCrossing() bool {
	rb := v.rb
	rb.closeMu.Lock()
	defer rb.closeMu.Unlock()
	if rb.cur.Load() != v {
		return false
	}
	rb.crossing = true
	return true
}

// readKept copies kept bytes from pos into p. The caller holds rb.mu.
func (v *replayView) readKept(p []byte) int {
	chunks := v.rb.chunks
	n := 0
	for n < len(p) && v.ci < len(chunks) {
		c := chunks[v.ci]
		k := copy(p[n:], c[v.off:])
		n += k
		v.off += k
		if v.off == len(c) {
			if v.ci+1 == len(chunks) {
				break // the last chunk: more may be appended to it
			}
			v.ci, v.off = v.ci+1, 0
		}
	}
	v.pos += int64(n)
	return n
}

// Close ends this attempt's use of the body. It closes the original only
// when the call has returned and this is the last attempt's view (see end);
// it never waits for a read.
func (v *replayView) Close() error {
	if !v.closed.CompareAndSwap(false, true) {
		return nil
	}
	rb := v.rb
	rb.closeMu.Lock()
	last := rb.ended && rb.cur.Load() == v
	rb.closeMu.Unlock()
	if last {
		rb.closeSrc()
	}
	return nil
}
