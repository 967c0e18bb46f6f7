package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chunkReader returns data in reads whose sizes the pattern sets, in turn:
// 0 to 7 bytes, 0 being a read that returns nothing (at least one read in
// each round of the pattern returns something). With eofWithData, the read
// that returns the last bytes also returns io.EOF.
type chunkReader struct {
	data        []byte
	pattern     []byte
	eofWithData bool
	off         int // how many bytes the reads have returned
	i           int // the next pattern entry
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	n := 1
	if len(r.pattern) > 0 {
		n = int(r.pattern[r.i%len(r.pattern)] % 8)
		if r.i%len(r.pattern) == len(r.pattern)-1 {
			n = max(n, 1) // progress, whatever the pattern
		}
		r.i++
	}
	n = copy(p, r.data[r.off:r.off+min(n, len(r.data)-r.off)])
	r.off += n
	if r.eofWithData && r.off == len(r.data) {
		return n, io.EOF
	}
	return n, nil
}

// FuzzEventStream feeds a stream to an eventBody in chunks a pattern sets,
// reads it back with buffers the pattern also sets, and checks that the
// body hands on every byte the underlying reader returned, once and in
// order; that its parser judges the same events as one fed the whole
// stream at once; and that the read ends as that parser says it must: on
// the error event, after its bytes; else at the end of the input, clean
// after the final event (or any end without an Event), cut before it.
func FuzzEventStream(f *testing.F) {
	seeds := []string{
		"event: message_start\ndata: " + anthropicMessageStart + "\n\nevent: content_block_delta\ndata: " +
			anthropicBlockDelta + "\n\nevent: message_stop\ndata: " + anthropicMessageStop + "\n\n",
		"event: message_start\r\ndata: " + anthropicMessageStart + "\r\n\r\n: ping\r\n\r\nevent: error\r\ndata: " +
			anthropicError("overloaded_error") + "\r\n\r\n",
		"data: " + chatRoleOnly + "\r\rdata: " + chatContent + "\r\rdata: [DONE]\r\r",
		"data: " + chatRoleOnly + "\n\ndata: " + chatError + "\n\ndata: " + chatContent + "\n\n",
		"event: response.created\ndata: " + responsesCreated + "\n\nevent: error\ndata: " + responsesError + "\n\n",
		"event: response.in_progress\ndata: " + responsesInProgress + "\n\nevent: response.failed\ndata: " +
			responsesFailed + "\n\n",
		"event: response.output_text.delta\ndata: " + responsesDelta + "\n\nevent: response.completed\ndata: " +
			responsesCompleted + "\n\n",
		mixedStream,
		"event: error\n\ndata\n\n:" + strings.Repeat("x", 300) + "\n\nevent: ping\ndata: " + strings.Repeat("y", 300) + "\n\n",
		"",
	}
	for i, s := range seeds {
		f.Add([]byte(s), []byte{byte(i), 1, 7, 0, 3, 5, 2, 6})
		f.Add([]byte(s), []byte{byte(i) | 0x0b, 0xff})
	}
	f.Fuzz(func(t *testing.T, stream, pattern []byte) {
		var mode byte
		if len(pattern) > 0 {
			mode = pattern[0]
		}
		limit := DefaultStreamReadAhead
		if mode&1 != 0 {
			limit = 16 + int(mode>>4)*8
		}
		ahead, nilJudge, eofWithData := mode&2 != 0, mode&4 != 0, mode&8 != 0

		// What one parser, fed the whole stream at once, makes of it.
		ref := &recorder{}
		whole := &eventParser{judge: ref.judge, max: limit}
		if nilJudge {
			whole.judge = nil
		}
		whole.feed(stream)

		rec := &recorder{}
		s := &Stream{Event: rec.judge, ReadAhead: limit}
		if nilJudge {
			s.Event = nil
		}
		r := &chunkReader{data: stream, pattern: pattern, eofWithData: eofWithData}
		b := newEventBody(io.NopCloser(r), s)
		if ahead {
			x := new(exchange)
			x.ctx.start(context.Background(), 1, time.Time{}, time.Hour)
			ok := b.readAhead(x)
			x.ctx.release()
			if !ok {
				t.Fatal("readAhead reported the attempt ended")
			}
			if len(b.held) > limit {
				t.Fatalf("read ahead %d bytes, more than ReadAhead %d", len(b.held), limit)
			}
			if !bytes.Equal(b.held, stream[:r.off]) {
				t.Fatalf("held %q, want the %d bytes read, %q", b.held, r.off, stream[:r.off])
			}
			if len(pattern) < maxEmptyReads && !b.p.decided() && b.rerr == nil && len(b.held) < limit {
				t.Fatalf("read ahead stopped at %d bytes, undecided, without an error, before ReadAhead %d",
					len(b.held), limit)
			}
		}

		var out []byte
		var err error
		for i := 0; ; i++ {
			size := 1
			if len(pattern) > 0 {
				size = int(pattern[(i+1)%len(pattern)]>>3)%16 + 1
			}
			buf := make([]byte, size)
			n, rerr := b.Read(buf)
			out = append(out, buf[:n]...)
			if rerr != nil {
				err = rerr
				break
			}
			if i > (len(stream)+2)*(len(pattern)+2) { // a byte at least every round of the pattern
				t.Fatalf("no end after %d reads", i)
			}
		}

		if !bytes.Equal(out, stream[:r.off]) {
			t.Fatalf("read %q, want the %d bytes the reader returned, %q", out, r.off, stream[:r.off])
		}
		if calls, want := rec.calls(), ref.calls(); !slices.Equal(calls, want) {
			t.Fatalf("events judged in chunks differ from the whole stream's (-whole +chunks):\n%s",
				cmp.Diff(want, calls))
		}
		if got, want := stateOf(&b.p), stateOf(whole); got.Output != want.Output || got.Final != want.Final ||
			!sameStreamError(got.Err, want.Err) {
			t.Fatalf("parser state in chunks %+v, whole %+v", got, want)
		}
		if whole.err != nil {
			se, ok := errors.AsType[*StreamError](err)
			if !ok || !sameStreamError(se, whole.err) {
				t.Fatalf("read ended with %v, want the error event %+v", err, whole.err)
			}
			// The bytes handed on before the error hold the whole error event.
			p := &eventParser{judge: LLMEvent, max: limit}
			p.feed(out)
			if !sameStreamError(p.err, whole.err) {
				t.Fatalf("the bytes read before the error, %q, do not hold the error event", out)
			}
			if n, again := b.Read(make([]byte, 8)); n != 0 || again != err {
				t.Fatalf("read after the error = %d, %v; want 0, %v again", n, again, err)
			}
			return
		}
		if r.off != len(stream) {
			t.Fatalf("read %d of %d bytes before %v", r.off, len(stream), err)
		}
		if whole.final || nilJudge {
			if err != io.EOF {
				t.Fatalf("read ended with %v, want io.EOF", err)
			}
		} else if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("read ended with %v, want io.ErrUnexpectedEOF: no final event", err)
		}
	})
}
