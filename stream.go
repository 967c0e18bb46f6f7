package retry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// DefaultStreamReadAhead is the most of an event stream the Transport
// holds back, by default, while it waits for the stream's first output.
const DefaultStreamReadAhead = 64 << 10

// Stream tells a [Transport] how to read the server-sent events
// (text/event-stream) of an API, so that a stream that fails before its
// first output is retried unseen and a stream that breaks later never
// passes for a whole one.
//
// With a Stream set, the Transport reads a 2xx event stream ahead, before
// it returns the response, until the first event that carries output (or
// an event Event does not call a preamble, the stream's final event, or
// ReadAhead bytes). This is the stream's commit point. An error event met
// before it proves that nothing was generated: the Transport judges it as
// the HTTP status it stands for, by the same rules as a status (the
// Policy's Retryable, the replay rules, Retry-After), and retries it unseen
// when they allow. Otherwise the caller gets the response, and reads first
// the bytes held back, then the rest, byte for byte as the server sent them.
// The first output must arrive within the attempt timeout, as the headers
// must: set Policy.AttemptTimeout above the longest a model may think before
// its first token.
//
// Past the commit point nothing can be sent again unseen, so the body
// reports what it sees instead: after an error event, and the bytes that
// brought it, a read returns a [*StreamError]; a stream that ends before
// its final event ends with an error wrapping [io.ErrUnexpectedEOF], never
// a clean io.EOF. Both are retried by [IsRetryable] and [LLMRetryable], so
// a [Do] around the whole stream starts it over.
//
// A request that cannot be sent again (its body has no GetBody and no
// ReplayBuffer keeps it) is not held back: its body only reports errors
// and cuts as above.
//
// A Stream is a plain value; it may be shared by many Transports, and its
// Event function must be safe for concurrent use.
type Stream struct {
	// Event says what one event is, from its type (the "event" field, ""
	// when it has none) and its data (its "data" lines joined by "\n").
	// It must not keep data, nor modify it. Nil means every event is
	// output and none is final: the response is held back to its first
	// event, and a stream may end anywhere. [LLMEvent], [OpenAIEvent] and
	// [AnthropicEvent] describe the LLM APIs. An Event that never reports
	// [EventFinal] makes every stream end with io.ErrUnexpectedEOF.
	Event func(typ string, data []byte) StreamEvent

	// ReadAhead is the most the Transport holds back while it waits for
	// the first output, and the largest event it judges: a larger event
	// counts as output. Zero means DefaultStreamReadAhead; a negative
	// value is a configuration error.
	ReadAhead int
}

// EventKind is what a [StreamEvent] says of an event.
type EventKind int

const (
	// EventOutput is an event that carries output (a token, a tool call):
	// once it is seen, nothing may be sent again unseen. It is the zero
	// value, so that an event a Stream does not know commits the stream.
	EventOutput EventKind = iota
	// EventPreamble is an event that comes before any output and carries
	// none (a message start, a ping, an empty delta).
	EventPreamble
	// EventFinal is the stream's last event: the answer is whole once it
	// has arrived.
	EventFinal
	// EventError reports an error; StreamEvent.Status says which.
	EventError
)

// String returns the kind's name: "output", "preamble", "final" or "error".
func (k EventKind) String() string {
	switch k {
	case EventOutput:
		return "output"
	case EventPreamble:
		return "preamble"
	case EventFinal:
		return "final"
	case EventError:
		return "error"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// StreamEvent is what Stream.Event says of one event.
type StreamEvent struct {
	Kind EventKind // what the event is; the zero value is EventOutput

	// Status is, for an EventError, the HTTP status the error stands for:
	// 529 for an overloaded API, 429 for a rate limit, 500 for a server
	// error, a 4xx for an error that will not pass. Zero means unknown: such
	// an error is never retried, and before the commit point the response
	// is handed over as it is.
	Status int
}

// StreamError is the error a response body returns, through a Transport
// with a [Stream], after an event that reports an error. The bytes of the
// event itself were read before it, as the server sent them.
// [IsRetryable] judges it by Status, as it would a [*StatusError].
type StreamError struct {
	Event  string // the event's type, such as "error" or "response.failed"; "" when it has none
	Data   []byte // the event's data
	Status int    // the HTTP status the error stands for, as Stream.Event judged it; 0 if unknown
}

// Error reports the event's type and the status it stands for, never its
// data.
func (e *StreamError) Error() string {
	s := "retry: the event stream reported an error"
	if e.Event != "" {
		s += " (event " + strconv.Quote(e.Event) + ")"
	}
	if e.Status != 0 {
		s += ": " + statusMessage(e.Status)
	}
	return s
}

// errStreamCut is what a stream that ends before its final event returns in
// place of io.EOF.
var errStreamCut = fmt.Errorf("retry: the event stream ended before its final event: %w", io.ErrUnexpectedEOF)

// errStreamTimedOut is the error of an attempt whose timeout passed while
// the Transport waited for the stream's first output.
var errStreamTimedOut = errors.New("retry: attempt timed out waiting for the event stream's first output")

func (s *Stream) validate() error {
	if s.ReadAhead < 0 {
		return fmt.Errorf("%w: Stream.ReadAhead is %d; it must not be negative", ErrInvalidPolicy, s.ReadAhead)
	}
	return nil
}

func (s *Stream) readAhead() int { return orDefault(s.ReadAhead, DefaultStreamReadAhead) }

// hasStream reports a response to req that carries an event stream: a 2xx
// text/event-stream with a body. An empty one (net/http's NoBody for a
// Content-Length of 0) counts: it is a stream cut before its first event.
func hasStream(req *http.Request, resp *http.Response) bool {
	return resp.StatusCode >= 200 && resp.StatusCode != http.StatusNoContent &&
		resp.StatusCode != http.StatusNotModified && req.Method != http.MethodHead &&
		resp.Body != nil && isEventStream(resp.Header)
}

// isEventStream reports a text/event-stream response, without allocating.
func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	const mt = "text/event-stream"
	if len(ct) < len(mt) || !strings.EqualFold(ct[:len(mt)], mt) {
		return false
	}
	rest := ct[len(mt):]
	return rest == "" || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t'
}

// eventParser follows an event stream as its bytes pass, by the rules of
// the HTML standard's "Interpreting an event stream": lines end in CRLF, LF
// or CR; an empty line dispatches the event; a "data" line appends its
// value and a line feed, an "event" line sets the type, a line that starts
// with a colon is a comment, and an event without data is not dispatched.
type eventParser struct {
	judge func(string, []byte) StreamEvent // nil: every event is output
	max   int                              // the largest line and data judged

	line    []byte // the start of a line that a later feed ends, while it is at most max
	lineN   int    // the length of that start, counting what line dropped
	cr      bool   // the last byte was a CR: a LF next ends no line
	typ     []byte // the current event's type
	data    []byte // the current event's data lines, each with its LF
	hasData bool   // the current event has a data line
	long    bool   // the current event passed max: it counts as output
	name    string // the type last passed to judge, reused while it repeats

	output bool         // an event with output (or one not judged) arrived
	final  bool         // the final event arrived
	err    *StreamError // an error event arrived; nothing after it is parsed
}

// decided reports that the stream reached its commit point.
func (e *eventParser) decided() bool { return e.output || e.final || e.err != nil }

// feed parses the next bytes of the stream.
func (e *eventParser) feed(p []byte) {
	for len(p) > 0 && e.err == nil {
		if e.cr {
			e.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			i = len(p)
		}
		if j := bytes.IndexByte(p[:i], '\r'); j >= 0 {
			i = j
		}
		if i == len(p) { // the line goes on in the next bytes
			e.lineN += len(p)
			if e.lineN <= e.max {
				e.line = append(e.line, p...)
			}
			return
		}
		e.cr = p[i] == '\r'
		if e.lineN == 0 { // the whole line is in p: no copy
			e.endLine(p[:i], i)
		} else {
			e.lineN += i
			if e.lineN <= e.max {
				e.line = append(e.line, p[:i]...)
			}
			e.endLine(e.line, e.lineN)
			e.line = e.line[:0]
		}
		e.lineN = 0
		p = p[i+1:]
	}
}

// endLine takes a line of n bytes, of which line holds those kept.
func (e *eventParser) endLine(line []byte, n int) {
	switch {
	case n == 0:
		e.dispatch()
		return
	case n > e.max:
		e.long = true
		return
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "event":
		e.typ = append(e.typ[:0], value...)
	case "data":
		e.hasData = true
		if len(e.data)+len(value)+1 > e.max {
			e.long = true
			return
		}
		e.data = append(append(e.data, value...), '\n')
	}
}

// dispatch judges the event that an empty line ended, and starts the next.
func (e *eventParser) dispatch() {
	defer e.reset()
	if !e.hasData && !e.long {
		return
	}
	if e.long || e.judge == nil {
		e.output = true
		return
	}
	data := e.data[:len(e.data)-1]
	if string(e.typ) != e.name { // compared without allocating
		e.name = eventName(e.typ)
	}
	switch ev := e.judge(e.name, data); ev.Kind {
	case EventPreamble:
	case EventFinal:
		e.final = true
	case EventError:
		e.err = &StreamError{Event: e.name, Data: bytes.Clone(data), Status: ev.Status}
	default:
		e.output = true
	}
}

// reset starts the next event.
func (e *eventParser) reset() {
	e.typ, e.data, e.hasData, e.long = e.typ[:0], e.data[:0], false, false
}

// eventBody is a response body that follows its event stream: it hands on
// first the bytes read ahead, then the rest, and reports an error event or a
// cut instead of a clean end.
type eventBody struct {
	rc     io.ReadCloser
	p      eventParser
	held   []byte           // read ahead, not yet handed on
	pooled *[firstRead]byte // held's array, from aheadPool, until held is handed on; only Read uses it
	rerr   error            // the error that ended the read-ahead, handed on after held

	// The parser's first buffers, in the same allocation.
	typ  [32]byte
	data [512]byte
}

func newEventBody(rc io.ReadCloser, s *Stream) *eventBody {
	b := &eventBody{rc: rc, p: eventParser{judge: s.Event, max: s.readAhead()}}
	b.p.typ, b.p.data = b.typ[:0], b.data[:0]
	return b
}

// eventName returns the event type b as a string, without allocating for
// the types the LLM APIs send most.
func eventName(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "message_start":
		return "message_start"
	case "content_block_start":
		return "content_block_start"
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_stop":
		return "content_block_stop"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "ping":
		return "ping"
	case "error":
		return "error"
	case "response.created":
		return "response.created"
	case "response.in_progress":
		return "response.in_progress"
	case "response.output_text.delta":
		return "response.output_text.delta"
	case "response.completed":
		return "response.completed"
	}
	return string(b)
}

// firstRead is the size of the read-ahead's first buffer: most streams'
// first output comes within it, and it doubles up to Stream.ReadAhead.
const firstRead = 1 << 10

// readAhead reads until the commit point, the read-ahead limit, an error or
// the end. The attempt's end (its timeout, the Deadline, the caller's
// cancel) closes the body and cuts the read: it reports false then.
func (b *eventBody) readAhead(x *exchange) bool {
	limit := b.p.max
	b.pooled = aheadPool.Get().(*[firstRead]byte)
	buf := b.pooled[:0:min(limit, firstRead)]
	x.ctx.closeOnEnd(b.rc)
	for empty := 0; !b.p.decided() && len(buf) < limit && empty < maxEmptyReads; {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), limit))
			buf = grown[:copy(grown, buf)]
			b.free()
		}
		k, err := b.rc.Read(buf[len(buf):cap(buf)])
		b.p.feed(buf[len(buf) : len(buf)+k])
		buf = buf[:len(buf)+k]
		if err != nil {
			b.rerr = err
			break
		}
		if k == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	if stopped := x.ctx.stopClose(); x.ctx.Err() != nil {
		if stopped {
			_ = b.rc.Close()
		}
		b.free()
		return false
	}
	b.held = buf
	return true
}

// aheadPool holds read-ahead buffers. One goes back when the caller has
// read all it held (as a stream's reader does at once), or when the stream
// is thrown away; one whose body is closed first is left to the collector.
var aheadPool = sync.Pool{New: func() any { return new([firstRead]byte) }}

// free gives the read-ahead buffer back; nothing may be read from it after.
func (b *eventBody) free() {
	if b.pooled != nil {
		aheadPool.Put(b.pooled)
		b.pooled, b.held = nil, nil
	}
}

func (b *eventBody) Read(p []byte) (int, error) {
	if len(b.held) > 0 {
		n := copy(p, b.held)
		if b.held = b.held[n:]; len(b.held) == 0 {
			b.free()
		}
		return n, nil
	}
	if b.p.err != nil {
		return 0, b.p.err
	}
	if b.rerr != nil {
		return 0, b.end(b.rerr)
	}
	n, err := b.rc.Read(p)
	b.p.feed(p[:n])
	if err != nil {
		b.rerr = err
		err = b.end(err)
	}
	return n, err
}

// end returns what a read that ended on err reports: the error event, if
// one arrived; a cut, for a stream that ended before its final event.
func (b *eventBody) end(err error) error {
	if b.p.err != nil {
		return b.p.err
	}
	if err == io.EOF && b.p.judge != nil && !b.p.final {
		return errStreamCut
	}
	return err
}

func (b *eventBody) Close() error { return b.rc.Close() }

// stream ends an attempt answered with a 2xx event stream while
// Transport.Stream is set: it holds the response back until the commit
// point, and judges an error event met before it as a status.
func (c *call) stream(x *exchange, resp *http.Response) (*http.Response, bool, error) {
	b := newEventBody(resp.Body, c.t.Stream)
	resp.Body = b
	if !c.bodyAgain() || c.l.ctx.Err() != nil {
		c.learn(resp, nil)
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil // it could not be sent again
	}
	if !b.readAhead(x) {
		c.learn(nil, errStreamTimedOut)
		x.ctx.release()
		return c.failed(&attemptTimeoutError{errStreamTimedOut}, c.replay)
	}
	if !b.p.decided() && b.rerr != nil { // broken, or ended, before any output
		err := b.end(b.rerr)
		if err == io.EOF { // a stream with no events, whose Stream needs no final one
			c.learn(resp, nil)
			return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
		}
		c.learn(nil, err)
		_ = b.rc.Close()
		b.free()
		x.ctx.release()
		return c.failed(err, c.replay)
	}
	if ev := b.p.err; ev != nil && !b.p.output { // else the error came after output
		c.learn(resp, ev)
		if ev.Status != 0 {
			se := &StatusError{StatusCode: ev.Status, Message: statusMessage(ev.Status), Response: resp, Body: ev.Data}
			if se.RetryAfter = c.l.held; se.RetryAfter == 0 {
				se.RetryAfter, _ = ParseRetryAfter(resp.Header, c.l.p.now())
			}
			if c.resendable(se) {
				return c.judge(x, resp, se)
			}
			c.skippedStatus(se)
		}
		return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
	}
	c.learn(resp, nil)
	return x.deliver(resp, c.t.BodyIdleTimeout), true, nil
}
