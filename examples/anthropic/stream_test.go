package main

// Tests of retry.Transport.Stream under the SDK's Messages.NewStreaming,
// against a local fake that speaks the Messages streaming wire format:
// message_start, content_block_start, ping, content_block_delta events,
// content_block_stop, message_delta, message_stop; and an error event,
// before the output or after some of it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"go.uber.org/goleak"
)

// outcome is how the fake ends one stream.
type outcome int

const (
	whole       outcome = iota // every event, message_stop last
	errorBefore                // an error event before any output
	errorAfter                 // an error event after some deltas
	dropped                    // the connection drops after some deltas
	ended                      // the body ends cleanly after some deltas, without message_stop
)

// plan is what the fake sends for one attempt.
type plan struct {
	outcome  outcome
	errType  string   // the error event's error type
	preamble bool     // errorBefore: message_start, content_block_start and ping come first
	words    []string // the answer, one text_delta each
	deltas   int      // errorAfter, dropped, ended: the deltas sent before the failure
}

func (p plan) text() string { return strings.Join(p.words, "") }

// sent is the text the fake sent before the failure.
func (p plan) sent() string { return strings.Join(p.sentWords(), "") }

// sentWords is the words of p's text sent before its failure.
func (p plan) sentWords() []string {
	switch p.outcome {
	case whole:
		return p.words
	case errorBefore:
		return nil
	}
	return p.words[:p.deltas]
}

// messageFake is a Messages API that answers attempt n of a call (named by
// its X-Call header) by plan(call, n). It records, for each call, the text
// of the stream it sent whole.
type messageFake struct {
	srv  *httptest.Server
	plan func(call string, n int) plan

	requests atomic.Int32

	mu    sync.Mutex        // protects tries and whole
	tries map[string]int    // attempts received, by call
	whole map[string]string // the text sent up to message_stop, by call
}

func newMessageFake(t *testing.T, plan func(call string, n int) plan) *messageFake {
	t.Helper()
	f := &messageFake{plan: plan, tries: map[string]int{}, whole: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *messageFake) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	call := r.Header.Get("X-Call")
	f.mu.Lock()
	f.tries[call]++
	p := f.plan(call, f.tries[call])
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", "req_stream"+call)
	w.WriteHeader(http.StatusOK)
	s := sse{w: w}
	if p.outcome == errorBefore {
		if p.preamble {
			s.start()
		}
		s.error(p.errType)
		return
	}
	s.start()
	for _, word := range p.sentWords() {
		s.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(word)+`}}`)
	}
	switch p.outcome {
	case errorAfter:
		s.error(p.errType)
	case dropped:
		panic(http.ErrAbortHandler) // closes the connection mid-body
	case whole:
		f.mu.Lock() // before message_stop, which may end the call
		f.whole[call] = p.text()
		f.mu.Unlock()
		s.event("content_block_stop", `{"type":"content_block_stop","index":0}`)
		s.event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`+strconv.Itoa(len(p.words))+`}}`)
		s.event("message_stop", `{"type":"message_stop"}`)
	}
}

// wholeText returns the text the fake sent whole for call, "" if none.
func (f *messageFake) wholeText(call string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.whole[call]
}

// sse writes Anthropic's server-sent events, each flushed at once.
type sse struct{ w http.ResponseWriter }

func (s sse) event(typ, data string) {
	_, _ = io.WriteString(s.w, "event: "+typ+"\ndata: "+data+"\n\n")
	_ = http.NewResponseController(s.w).Flush()
}

// start writes the events before the first text_delta.
func (s sse) start() {
	s.event("message_start", `{"type":"message_start","message":{"id":"msg_stream","type":"message","role":"assistant","model":"`+
		string(model)+`","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`)
	s.event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	s.event("ping", `{"type": "ping"}`)
}

// error writes an error event, as Anthropic sends one inside a 200 stream.
func (s sse) error(typ string) {
	s.event("error", `{"type":"error","error":{"type":`+jsonString(typ)+`,"message":`+jsonString(errMessage[typ])+`}}`)
}

var errMessage = map[string]string{
	"overloaded_error":      "Overloaded",
	"rate_limit_error":      "Number of request tokens has exceeded your per-minute rate limit.",
	"api_error":             "Internal server error",
	"invalid_request_error": "max_tokens: Field required",
}

func jsonString(s string) string { return mustJSON(s) }

// readMessage streams a message and writes its text to w as it arrives, as
// most callers do: it ignores the events that carry no text and returns the
// stream's error. deltas counts the text deltas received.
func readMessage(ctx context.Context, c anthropic.Client, call string, w io.Writer) (deltas int, err error) {
	stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	}, option.WithHeader("X-Call", call))
	defer stream.Close()
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			deltas++
			_, _ = io.WriteString(w, ev.Delta.Text)
		}
	}
	return deltas, stream.Err()
}

// isEventError reports the SDK's error for an error event in a stream: an
// *anthropic.Error with the stream's own status, 200.
func isEventError(err error) bool {
	apiErr, ok := errors.AsType[*anthropic.Error](err)
	return ok && apiErr.StatusCode == http.StatusOK
}

// llmStream is the Stream the tests set on their Transports.
func llmStream() *retry.Stream { return &retry.Stream{Event: retry.LLMEvent} }

// recipeTransport is the example's Transport (newPolicy, newTransport) with
// fake time and, when s is not nil, a Stream.
func recipeTransport(ft *retrytest.FakeTime, s *retry.Stream) *retry.Transport {
	p := newPolicy(slog.New(slog.DiscardHandler))
	p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
	t := newTransport(p)
	t.Stream = s
	return t
}

// streamingTransport is docs/llm.md's Transport for a retry.Do around the
// whole stream: one attempt, an idle timeout, and s.
func streamingTransport(s *retry.Stream) *retry.Transport {
	return &retry.Transport{
		Policy:          retry.Policy{MaxAttempts: 1}, // Do retries the whole stream; don't multiply layers
		BodyIdleTimeout: 30 * time.Second,             // a stream silent this long has stalled
		Stream:          s,
	}
}

// doPolicy is docs/llm.md's policy for one attempt per stream, with fake
// time.
func doPolicy(ft *retrytest.FakeTime) retry.Policy {
	return retry.Policy{AttemptTimeout: 5 * time.Minute, Retryable: retry.LLMRetryable,
		Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}
}

// streamResult is what one way of calling got.
type streamResult struct {
	requests int // the requests the fake received
	text     string
	err      error
}

// wholeCell tells whether r holds the whole answer, for the logged table.
func (r streamResult) wholeCell(answer string) string {
	switch {
	case r.err == nil && r.text == answer:
		return "yes"
	case r.err == nil:
		return fmt.Sprintf("no: text %q, no error", r.text)
	}
	if apiErr, ok := errors.AsType[*anthropic.Error](r.err); ok {
		return fmt.Sprintf("no: *anthropic.Error %d %s", apiErr.StatusCode, apiErr.Type())
	}
	return fmt.Sprintf("no: %T", r.err)
}

// want is what one way of calling should get.
type want struct {
	requests int
	whole    bool // the text is the answer and there is no error; else no text and an *anthropic.Error
}

func (w want) check(t *testing.T, got streamResult, answer string) {
	t.Helper()
	if got.requests != w.requests {
		t.Errorf("the fake received %d requests, want %d", got.requests, w.requests)
	}
	if w.whole {
		if got.err != nil || got.text != answer {
			t.Errorf("got text %q, error %v; want %q, no error", got.text, got.err, answer)
		}
		return
	}
	if _, ok := errors.AsType[*anthropic.Error](got.err); !ok || got.text != "" {
		t.Errorf("got text %q, error %v (%T); want no text and an *anthropic.Error", got.text, got.err, got.err)
	}
}

// askTransport reads one stream through the example's Transport, which
// retries.
func askTransport(t *testing.T, script func(string, int) plan, s *retry.Stream) streamResult {
	f := newMessageFake(t, script)
	client := newClient("sk-ant-test", f.srv.URL, recipeTransport(retrytest.NewFakeTime(), s))
	var b strings.Builder
	_, err := readMessage(t.Context(), client, "1", &b)
	return streamResult{requests: int(f.requests.Load()), text: b.String(), err: err}
}

// askDo reads one stream with retry.Do around it, over docs/llm.md's
// streaming Transport, which does not retry.
func askDo(t *testing.T, script func(string, int) plan, s *retry.Stream) streamResult {
	f := newMessageFake(t, script)
	client := newClient("sk-ant-test", f.srv.URL, streamingTransport(s))
	attempts := 0
	text, err := retry.Do(t.Context(), doPolicy(retrytest.NewFakeTime()), func(ctx context.Context) (string, error) {
		attempts++
		var b strings.Builder // buffer, then show
		_, err := readMessage(ctx, client, "1", &b)
		return b.String(), err
	})
	got := streamResult{requests: int(f.requests.Load()), text: text, err: err}
	if attempts != got.requests {
		t.Errorf("Do made %d attempts for %d requests, want one request each", attempts, got.requests)
	}
	return got
}

func TestStreamErrorBeforeOutputIsRetriedUnseen(t *testing.T) {
	t.Parallel()
	const answer = "Hello, streamed world."
	good := plan{outcome: whole, words: []string{"Hello", ",", " streamed", " world."}}
	failing := func(typ string) plan { return plan{outcome: errorBefore, errType: typ, preamble: true} }
	tests := []struct {
		name          string
		fail          plan          // the first two streams; the third is good
		stream        *retry.Stream // on both Transports
		wantTransport want
		wantDo        want
	}{{
		name: "Messages, overloaded_error", fail: failing("overloaded_error"), stream: llmStream(),
		wantTransport: want{requests: 3, whole: true}, wantDo: want{requests: 3, whole: true},
	}, {
		name: "Messages, rate_limit_error", fail: failing("rate_limit_error"), stream: llmStream(),
		wantTransport: want{requests: 3, whole: true}, wantDo: want{requests: 3, whole: true},
	}, {
		name: "Messages, api_error as the first event", fail: plan{outcome: errorBefore, errType: "api_error"}, stream: llmStream(),
		wantTransport: want{requests: 3, whole: true}, wantDo: want{requests: 3, whole: true},
	}, {
		name: "Messages, invalid_request_error (final)", fail: failing("invalid_request_error"), stream: llmStream(),
		wantTransport: want{requests: 1}, wantDo: want{requests: 1},
	}, {
		// The behaviour before Stream: the Transport hands the 200 over, and
		// the SDK reports the error event after one request. Do retries it,
		// since LLMRetryable knows the SDK's error for an error event.
		name: "Messages, overloaded_error, no Stream", fail: failing("overloaded_error"), stream: nil,
		wantTransport: want{requests: 1}, wantDo: want{requests: 3, whole: true},
	}}
	var rows []string
	for _, tt := range tests {
		script := func(_ string, n int) plan {
			if n <= 2 {
				return tt.fail
			}
			return good
		}
		var viaTransport, viaDo streamResult
		t.Run(tt.name+"/Transport", func(t *testing.T) {
			viaTransport = askTransport(t, script, tt.stream)
			tt.wantTransport.check(t, viaTransport, answer)
		})
		t.Run(tt.name+"/Do", func(t *testing.T) {
			viaDo = askDo(t, script, tt.stream)
			tt.wantDo.check(t, viaDo, answer)
		})
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | Transport: %s; Do: %s |", tt.name,
			viaTransport.requests, viaDo.requests, viaTransport.wholeCell(answer), viaDo.wholeCell(answer)))
	}
	t.Logf("two streams with an error event before any output, then a good one:\n\n"+
		"| kind | requests with Transport | requests with Do | whole answer |\n|---|---|---|---|\n%s\n",
		strings.Join(rows, "\n"))
}

// The 1,000-stream run: how often each failure comes, per attempt.
const (
	thousandSeed = 1
	thousandCall = 1000
	maxAttempts  = 5
)

var vocabulary = []string{" retry", " stream", " event", " token", " answer", " whole", " server", " again", " first", " output"}

// thousandPlan decides, from the seed alone, how the fake answers attempt n
// of call: the same every run, whatever order the calls arrive in. Per
// attempt: 10% an error event before any output, 2.5% an error event after
// some deltas, 2.5% a cut after some deltas (about half a dropped
// connection, half a body that ends without message_stop).
func thousandPlan(call string, n int) plan {
	id, _ := strconv.Atoi(call)
	r := rand.New(rand.NewPCG(thousandSeed, uint64(id)<<8|uint64(n)))
	words := []string{"Call " + call + ", attempt " + strconv.Itoa(n) + ":"}
	for range 3 + r.IntN(5) {
		words = append(words, vocabulary[r.IntN(len(vocabulary))])
	}
	p := plan{
		words:    words,
		deltas:   1 + r.IntN(len(words)-1),
		errType:  []string{"overloaded_error", "api_error", "rate_limit_error"}[r.IntN(3)],
		preamble: r.IntN(2) == 0,
	}
	switch x := r.IntN(1000); {
	case x < 100:
		p.outcome = errorBefore
	case x < 125:
		p.outcome = errorAfter
	case x < 138:
		p.outcome = dropped
	case x < 150:
		p.outcome = ended
	}
	return p
}

// runCalls makes calls 0 to n-1 on 8 goroutines and returns each one's
// result, by call.
func runCalls(n int, call func(id string) callResult) []callResult {
	results := make([]callResult, n)
	ids := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range ids {
				results[id] = call(strconv.Itoa(id))
			}
		})
	}
	for id := range n {
		ids <- id
	}
	close(ids)
	wg.Wait()
	return results
}

type callResult struct {
	text   string
	deltas int // text deltas received before the end
	err    error
}

func TestStreamThousand(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("Transport", thousandTransport)
	t.Run("Do", thousandDo)
}

// thousandTransport is what a caller that shows the text live sees. The
// Transport retries every stream that fails before its first output; a
// failure after it reaches the caller, never as a clean end.
func thousandTransport(t *testing.T) {
	start := time.Now()
	f := newMessageFake(t, thousandPlan)
	ft := retrytest.NewFakeTime()
	client := newClient("sk-ant-test", f.srv.URL, recipeTransport(ft, llmStream()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	results := runCalls(thousandCall, func(id string) callResult {
		var b strings.Builder
		deltas, err := readMessage(ctx, client, id, &b)
		return callResult{text: b.String(), deltas: deltas, err: err}
	})

	var before, after, wantRetries int
	byKind := map[outcome]int{}
	for id, got := range results {
		call := strconv.Itoa(id)
		// The attempt the caller saw: the first one not failing before its
		// output, or the last.
		n := 1
		for n < maxAttempts && thousandPlan(call, n).outcome == errorBefore {
			n++
		}
		wantRetries += n - 1
		p := thousandPlan(call, n)
		switch {
		case got.err != nil && got.deltas == 0:
			before++
			t.Errorf("call %s failed before any output, after %d attempts: %v", call, n, got.err)
		case got.err != nil:
			after++
			if !retry.LLMRetryable(got.err) {
				t.Errorf("call %s: error %v (%T) is not LLMRetryable: Do would not start it over", call, got.err, got.err)
			}
		}
		switch p.outcome {
		case errorAfter:
			if !isEventError(got.err) {
				t.Errorf("call %s: error %v (%T), want the error event's", call, got.err, got.err)
			}
		case dropped, ended:
			if !errors.Is(got.err, io.ErrUnexpectedEOF) {
				t.Errorf("call %s: error %v (%T), want one wrapping io.ErrUnexpectedEOF", call, got.err, got.err)
			}
		}
		if got.err != nil {
			byKind[p.outcome]++
		}
		wantErr := p.outcome != whole
		if (got.err != nil) != wantErr || got.text != p.sent() || got.deltas != len(p.sentWords()) {
			t.Errorf("call %s, attempt %d (outcome %d): got text %q after %d deltas, error %v; want %q, error %t",
				call, n, p.outcome, got.text, got.deltas, got.err, p.sent(), wantErr)
		}
		if got.err == nil && f.wholeText(call) != got.text {
			t.Errorf("call %s: got %q, the fake sent %q whole", call, got.text, f.wholeText(call))
		}
	}
	retries := len(ft.Sleeps())
	if retries != wantRetries {
		t.Errorf("the Transport retried %d times, want %d (once per stream failing before its output)", retries, wantRetries)
	}
	if got, want := int(f.requests.Load()), thousandCall+wantRetries; got != want {
		t.Errorf("the fake received %d requests, want %d", got, want)
	}
	if after < thousandCall*2/100 || after > thousandCall*10/100 {
		t.Errorf("%d calls failed after their output, want about 5%%", after)
	}
	t.Logf("Messages, Transport with Stream: %d calls, %d requests, %d retried unseen before output; "+
		"failures before output %d, after output %d (%.1f%%: %d error events, %d dropped, %d ended without the final event) in %v",
		thousandCall, f.requests.Load(), retries, before, after, 100*float64(after)/thousandCall, byKind[errorAfter], byKind[dropped], byKind[ended],
		time.Since(start).Round(time.Millisecond))
}

// thousandDo is buffer, then show: retry.Do around the whole stream, the
// text in a buffer of the attempt's own. Every call ends with the whole
// answer of the attempt that succeeded.
func thousandDo(t *testing.T) {
	start := time.Now()
	f := newMessageFake(t, thousandPlan)
	client := newClient("sk-ant-test", f.srv.URL, streamingTransport(llmStream()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var attempts atomic.Int32
	results := runCalls(thousandCall, func(id string) callResult {
		p := doPolicy(retrytest.NewFakeTime()) // a clock per call: the others' sleeps don't eat its deadline
		p.MaxAttempts = maxAttempts
		text, err := retry.Do(ctx, p, func(ctx context.Context) (string, error) {
			attempts.Add(1)
			var b strings.Builder
			_, err := readMessage(ctx, client, id, &b)
			return b.String(), err
		})
		return callResult{text: text, err: err}
	})

	var failed, wantAttempts int
	for id, got := range results {
		call := strconv.Itoa(id)
		n := 1
		for n < maxAttempts && thousandPlan(call, n).outcome != whole {
			n++
		}
		wantAttempts += n
		if thousandPlan(call, n).outcome != whole {
			t.Fatalf("call %s fails all %d attempts with seed %d: pick another seed", call, maxAttempts, thousandSeed)
		}
		if got.err != nil {
			failed++
			t.Errorf("call %s: %v", call, got.err)
			continue
		}
		if want := thousandPlan(call, n).text(); got.text != want || f.wholeText(call) != want {
			t.Errorf("call %s: got %q; the fake sent %q whole, attempt %d planned %q", call, got.text, f.wholeText(call), n, want)
		}
	}
	if got := int(attempts.Load()); got != wantAttempts || int(f.requests.Load()) != wantAttempts {
		t.Errorf("Do made %d attempts and the fake received %d requests, want %d", got, f.requests.Load(), wantAttempts)
	}
	t.Logf("Messages, Do around the stream: %d calls, %d attempts, %d failed, every answer whole and the fake's, in %v",
		thousandCall, attempts.Load(), failed, time.Since(start).Round(time.Millisecond))
}
