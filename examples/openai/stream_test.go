package main

// Tests of retry.Transport.Stream under the SDK's streaming calls, against a
// local fake that speaks OpenAI's two streaming wire formats: chat
// completions (data-only chunks, a role-only chunk first, content deltas, a
// finish chunk, data: [DONE]; an error as a chunk with an "error" member)
// and the Responses API (typed events from response.created to
// response.completed; an error as an error event or response.failed).

import (
	"context"
	"encoding/json"
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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"go.uber.org/goleak"
)

// outcome is how the fake ends one stream.
type outcome int

const (
	whole       outcome = iota // every event, the final one last
	errorBefore                // an error before any output
	errorAfter                 // an error after some deltas
	dropped                    // the connection drops after some deltas
	ended                      // the body ends cleanly after some deltas, without the final event
)

// plan is what the fake sends for one attempt.
type plan struct {
	outcome  outcome
	errCode  string   // the error's type or code: server_error, rate_limit_exceeded, invalid_request_error
	failed   bool     // Responses: the error comes as response.failed, not as an error event
	preamble bool     // chat, errorBefore: a role-only chunk comes before the error
	words    []string // the answer, one delta each
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

// streamAPI is one of OpenAI's streaming APIs: where it is, how the fake
// writes a stream, and how a caller reads one.
type streamAPI struct {
	name string
	path string
	// write sends the stream p plans, and calls final just before the final
	// event.
	write func(s *sse, p plan, final func())
	// read streams an answer and writes its text to w as it arrives, as
	// most callers do: it ignores the events that carry no text and returns
	// the stream's error. deltas counts the text deltas received.
	read func(ctx context.Context, c openai.Client, call string, w io.Writer) (deltas int, err error)
	// isEventError reports the error a read returns after an error event
	// that came after output.
	isEventError func(error) bool
}

// chatAPI is chat completions. The SDK reports a chunk with an "error"
// member itself, as an *ssestream.StreamError.
var chatAPI = streamAPI{name: "chat completions", path: "/v1/chat/completions", write: writeChat, read: readChat,
	isEventError: func(err error) bool { _, ok := errors.AsType[*ssestream.StreamError](err); return ok }}

// responsesAPI is the Responses API. The SDK hands its error and
// response.failed events over as events; the body's *retry.StreamError,
// after them, is the stream's error.
var responsesAPI = streamAPI{name: "Responses", path: "/v1/responses", write: writeResponses, read: readResponses,
	isEventError: func(err error) bool { _, ok := errors.AsType[*retry.StreamError](err); return ok }}

// streamFake is an OpenAI API that answers attempt n of a call (named by its
// X-Call header) by plan(call, n). It records, for each call, the text of
// the stream it sent whole.
type streamFake struct {
	srv  *httptest.Server
	api  streamAPI
	plan func(call string, n int) plan

	requests atomic.Int32

	mu    sync.Mutex        // protects tries and whole
	tries map[string]int    // attempts received, by call
	whole map[string]string // the text sent up to the final event, by call
}

func newStreamFake(t *testing.T, api streamAPI, plan func(call string, n int) plan) *streamFake {
	t.Helper()
	f := &streamFake{api: api, plan: plan, tries: map[string]int{}, whole: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *streamFake) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != f.api.path {
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
	w.Header().Set("X-Request-Id", "req_stream"+call)
	w.WriteHeader(http.StatusOK)
	f.api.write(&sse{w: w}, p, func() {
		f.mu.Lock() // before the final event, which may end the call
		f.whole[call] = p.text()
		f.mu.Unlock()
	})
	if p.outcome == dropped {
		panic(http.ErrAbortHandler) // closes the connection mid-body
	}
}

// wholeText returns the text the fake sent whole for call, "" if none.
func (f *streamFake) wholeText(call string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.whole[call]
}

// sse writes server-sent events, each flushed at once.
type sse struct {
	w   http.ResponseWriter
	seq int // the Responses API's sequence_number of the next event
}

// data writes a data-only event, as chat completions sends them.
func (s *sse) data(data string) { s.write("data: " + data + "\n\n") }

// event writes a typed event, as the Responses API sends them.
func (s *sse) event(typ, data string) { s.write("event: " + typ + "\ndata: " + data + "\n\n") }

func (s *sse) write(ev string) {
	_, _ = io.WriteString(s.w, ev)
	_ = http.NewResponseController(s.w).Flush()
}

// next returns the next sequence_number, as JSON.
func (s *sse) next() string {
	n := s.seq
	s.seq++
	return strconv.Itoa(n)
}

func jsonString(s string) string { return mustJSON(s) }

// chatErrors are the error members of chat chunks, by the plan's errCode.
var chatErrors = map[string]string{
	"server_error":          `{"message":"The server had an error","type":"server_error","param":null,"code":null}`,
	"rate_limit_exceeded":   `{"message":"Rate limit reached for requests per min (RPM). Please try again in 20ms.","type":"requests","param":null,"code":"rate_limit_exceeded"}`,
	"invalid_request_error": `{"message":"Invalid value for 'n': 0.","type":"invalid_request_error","param":"n","code":null}`,
}

// chatChunk is one chat.completion.chunk with the given delta and
// finish_reason (both JSON).
func chatChunk(delta, finish string) string {
	return `{"id":"chatcmpl-stream","object":"chat.completion.chunk","created":1767225600,"model":"` + string(model) +
		`","service_tier":"default","system_fingerprint":"fp_stream","choices":[{"index":0,"delta":` + delta +
		`,"logprobs":null,"finish_reason":` + finish + `}]}`
}

const chatRole = `{"role":"assistant","content":"","refusal":null}`

func writeChat(s *sse, p plan, final func()) {
	if p.outcome == errorBefore {
		if p.preamble {
			s.data(chatChunk(chatRole, "null"))
		}
		s.data(`{"error":` + chatErrors[p.errCode] + `}`)
		return
	}
	s.data(chatChunk(chatRole, "null"))
	for _, word := range p.sentWords() {
		s.data(chatChunk(`{"content":`+jsonString(word)+`}`, "null"))
	}
	switch p.outcome {
	case errorAfter:
		s.data(`{"error":` + chatErrors[p.errCode] + `}`)
	case whole:
		s.data(chatChunk("{}", `"stop"`))
		final()
		s.data("[DONE]")
	}
}

func readChat(ctx context.Context, c openai.Client, call string, w io.Writer) (deltas int, err error) {
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	}, option.WithHeader("X-Call", call))
	defer stream.Close()
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			if ch.Delta.Content != "" {
				deltas++
				_, _ = io.WriteString(w, ch.Delta.Content)
			}
		}
	}
	return deltas, stream.Err()
}

// responseObject is a Response as the Responses API's events carry it.
func responseObject(status, output, errJSON, usage string) string {
	return `{"id":"resp_stream","object":"response","created_at":1767225600,"status":"` + status +
		`","background":false,"error":` + errJSON + `,"incomplete_details":null,"instructions":null,` +
		`"max_output_tokens":null,"model":"` + string(model) + `","output":` + output +
		`,"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},` +
		`"store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto",` +
		`"tools":[],"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
}

var responsesMessages = map[string]string{
	"server_error":        "The server had an error while processing your request. Sorry about that!",
	"rate_limit_exceeded": "Rate limit reached for requests per min (RPM).",
}

// responsesError writes the failure p plans: an error event, or
// response.failed.
func responsesError(s *sse, p plan) {
	if p.failed {
		s.event("response.failed", `{"type":"response.failed","sequence_number":`+s.next()+`,"response":`+
			responseObject("failed", "[]", `{"code":"`+p.errCode+`","message":`+jsonString(responsesMessages[p.errCode])+`}`, "null")+`}`)
		return
	}
	s.event("error", `{"type":"error","code":"`+p.errCode+`","message":`+jsonString(responsesMessages[p.errCode])+
		`,"param":null,"sequence_number":`+s.next()+`}`)
}

func writeResponses(s *sse, p plan, final func()) {
	s.event("response.created", `{"type":"response.created","sequence_number":`+s.next()+`,"response":`+
		responseObject("in_progress", "[]", "null", "null")+`}`)
	if p.outcome == errorBefore && !p.failed {
		responsesError(s, p) // sequence_number 1
		return
	}
	s.event("response.in_progress", `{"type":"response.in_progress","sequence_number":`+s.next()+`,"response":`+
		responseObject("in_progress", "[]", "null", "null")+`}`)
	if p.outcome == errorBefore {
		responsesError(s, p) // response.failed, sequence_number 2
		return
	}
	const part = `"item_id":"msg_stream","output_index":0,"content_index":0`
	s.event("response.output_item.added", `{"type":"response.output_item.added","sequence_number":`+s.next()+
		`,"output_index":0,"item":{"id":"msg_stream","type":"message","status":"in_progress","content":[],"role":"assistant"}}`)
	s.event("response.content_part.added", `{"type":"response.content_part.added","sequence_number":`+s.next()+
		`,`+part+`,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`)
	for _, word := range p.sentWords() {
		s.event("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":`+s.next()+
			`,`+part+`,"delta":`+jsonString(word)+`,"logprobs":[]}`)
	}
	switch p.outcome {
	case errorAfter:
		responsesError(s, p)
	case whole:
		text := jsonString(p.text())
		content := `{"type":"output_text","annotations":[],"logprobs":[],"text":` + text + `}`
		item := `{"id":"msg_stream","type":"message","status":"completed","content":[` + content + `],"role":"assistant"}`
		s.event("response.output_text.done", `{"type":"response.output_text.done","sequence_number":`+s.next()+
			`,`+part+`,"text":`+text+`,"logprobs":[]}`)
		s.event("response.content_part.done", `{"type":"response.content_part.done","sequence_number":`+s.next()+
			`,`+part+`,"part":`+content+`}`)
		s.event("response.output_item.done", `{"type":"response.output_item.done","sequence_number":`+s.next()+
			`,"output_index":0,"item":`+item+`}`)
		final()
		s.event("response.completed", `{"type":"response.completed","sequence_number":`+s.next()+`,"response":`+
			responseObject("completed", "["+item+"]", "null",
				`{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":`+strconv.Itoa(len(p.words))+
					`,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`+strconv.Itoa(12+len(p.words))+`}`)+`}`)
	}
}

func readResponses(ctx context.Context, c openai.Client, call string, w io.Writer) (deltas int, err error) {
	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
	}, option.WithHeader("X-Call", call))
	defer stream.Close()
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.output_text.delta" {
			deltas++
			_, _ = io.WriteString(w, ev.Delta)
		}
	}
	return deltas, stream.Err()
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
	if se, ok := errors.AsType[*ssestream.StreamError](r.err); ok {
		var chunk struct {
			Error struct{ Type string } `json:"error"`
		}
		_ = json.Unmarshal(se.Event.Data, &chunk)
		return "no: *ssestream.StreamError " + chunk.Error.Type
	}
	return fmt.Sprintf("no: %T", r.err)
}

// want is what one way of calling should get.
type want struct {
	requests int
	text     string
	err      bool // an *ssestream.StreamError; else no error
}

func (w want) check(t *testing.T, got streamResult) {
	t.Helper()
	if got.requests != w.requests {
		t.Errorf("the fake received %d requests, want %d", got.requests, w.requests)
	}
	_, isStreamErr := errors.AsType[*ssestream.StreamError](got.err)
	if got.text != w.text || w.err != isStreamErr || !w.err && got.err != nil {
		t.Errorf("got text %q, error %v (%T); want %q, an *ssestream.StreamError %t", got.text, got.err, got.err, w.text, w.err)
	}
}

// askTransport reads one stream through the example's Transport, which
// retries.
func askTransport(t *testing.T, api streamAPI, script func(string, int) plan, s *retry.Stream) streamResult {
	f := newStreamFake(t, api, script)
	client := newClient("sk-test", f.srv.URL+"/v1/", recipeTransport(retrytest.NewFakeTime(), s))
	var b strings.Builder
	_, err := api.read(t.Context(), client, "1", &b)
	return streamResult{requests: int(f.requests.Load()), text: b.String(), err: err}
}

// askDo reads one stream with retry.Do around it, over docs/llm.md's
// streaming Transport, which does not retry.
func askDo(t *testing.T, api streamAPI, script func(string, int) plan, s *retry.Stream) streamResult {
	f := newStreamFake(t, api, script)
	client := newClient("sk-test", f.srv.URL+"/v1/", streamingTransport(s))
	attempts := 0
	text, err := retry.Do(t.Context(), doPolicy(retrytest.NewFakeTime()), func(ctx context.Context) (string, error) {
		attempts++
		var b strings.Builder // buffer, then show
		_, err := api.read(ctx, client, "1", &b)
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
	whole := want{requests: 3, text: answer}
	tests := []struct {
		name          string
		api           streamAPI
		fail          plan          // the first two streams; the third is good
		stream        *retry.Stream // on both Transports
		wantTransport want
		wantDo        want
	}{{
		name: "chat completions, server_error first", api: chatAPI, stream: llmStream(),
		fail:          plan{outcome: errorBefore, errCode: "server_error"},
		wantTransport: whole, wantDo: whole,
	}, {
		name: "chat completions, rate_limit_exceeded after the role chunk", api: chatAPI, stream: llmStream(),
		fail:          plan{outcome: errorBefore, errCode: "rate_limit_exceeded", preamble: true},
		wantTransport: whole, wantDo: whole,
	}, {
		name: "Responses, event: error", api: responsesAPI, stream: llmStream(),
		fail:          plan{outcome: errorBefore, errCode: "server_error"},
		wantTransport: whole, wantDo: whole,
	}, {
		name: "Responses, event: response.failed", api: responsesAPI, stream: llmStream(),
		fail:          plan{outcome: errorBefore, errCode: "server_error", failed: true},
		wantTransport: whole, wantDo: whole,
	}, {
		name: "chat completions, invalid_request_error (final)", api: chatAPI, stream: llmStream(),
		fail:          plan{outcome: errorBefore, errCode: "invalid_request_error"},
		wantTransport: want{requests: 1, err: true}, wantDo: want{requests: 1, err: true},
	}, {
		// The behaviour before Stream: the Transport hands the 200 over.
		// The chat SDK reports the error chunk after one request (and Do
		// retries it: LLMRetryable knows the SDK's error); the Responses API's
		// stream just ends, with no text and no error.
		name: "chat completions, server_error first, no Stream", api: chatAPI, stream: nil,
		fail:          plan{outcome: errorBefore, errCode: "server_error"},
		wantTransport: want{requests: 1, err: true}, wantDo: whole,
	}, {
		name: "Responses, event: error, no Stream", api: responsesAPI, stream: nil,
		fail:          plan{outcome: errorBefore, errCode: "server_error"},
		wantTransport: want{requests: 1}, wantDo: want{requests: 1},
	}, {
		name: "Responses, event: response.failed, no Stream", api: responsesAPI, stream: nil,
		fail:          plan{outcome: errorBefore, errCode: "server_error", failed: true},
		wantTransport: want{requests: 1}, wantDo: want{requests: 1},
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
			viaTransport = askTransport(t, tt.api, script, tt.stream)
			tt.wantTransport.check(t, viaTransport)
		})
		t.Run(tt.name+"/Do", func(t *testing.T) {
			viaDo = askDo(t, tt.api, script, tt.stream)
			tt.wantDo.check(t, viaDo)
		})
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | Transport: %s; Do: %s |", tt.name,
			viaTransport.requests, viaDo.requests, viaTransport.wholeCell(answer), viaDo.wholeCell(answer)))
	}
	t.Logf("two streams with an error before any output, then a good one:\n\n"+
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
// attempt: 10% an error before any output, 2.5% an error after some
// deltas, 2.5% a cut after some deltas (about half a dropped connection,
// half a body that ends without its final event).
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
		errCode:  []string{"server_error", "rate_limit_exceeded"}[r.IntN(2)],
		failed:   r.IntN(2) == 0,
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

type callResult struct {
	text   string
	deltas int // text deltas received before the end
	err    error
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

func TestStreamThousand(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tests := []struct {
		api   streamAPI
		calls int
	}{
		{api: chatAPI, calls: thousandCall},
		// The SDK decodes the Responses API's events slowly under -race
		// (about 5ms a stream on two cores): fewer calls keep the test short.
		{api: responsesAPI, calls: 300},
	}
	for _, tt := range tests {
		t.Run(tt.api.name+"/Transport", func(t *testing.T) { thousandTransport(t, tt.api, tt.calls) })
		t.Run(tt.api.name+"/Do", func(t *testing.T) { thousandDo(t, tt.api, tt.calls) })
	}
}

// thousandTransport is what a caller that shows the text live sees. The
// Transport retries every stream that fails before its first output; a
// failure after it reaches the caller, never as a clean end.
func thousandTransport(t *testing.T, api streamAPI, calls int) {
	start := time.Now()
	f := newStreamFake(t, api, thousandPlan)
	ft := retrytest.NewFakeTime()
	client := newClient("sk-test", f.srv.URL+"/v1/", recipeTransport(ft, llmStream()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	results := runCalls(calls, func(id string) callResult {
		var b strings.Builder
		deltas, err := api.read(ctx, client, id, &b)
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
			if !api.isEventError(got.err) {
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
	if got, want := int(f.requests.Load()), calls+wantRetries; got != want {
		t.Errorf("the fake received %d requests, want %d", got, want)
	}
	if after < calls*2/100 || after > calls*10/100 {
		t.Errorf("%d calls failed after their output, want about 5%%", after)
	}
	t.Logf("%s, Transport with Stream: %d calls, %d requests, %d retried unseen before output; "+
		"failures before output %d, after output %d (%.1f%%: %d error events, %d dropped, %d ended without the final event) in %v",
		api.name, calls, f.requests.Load(), retries, before, after, 100*float64(after)/float64(calls), byKind[errorAfter], byKind[dropped], byKind[ended],
		time.Since(start).Round(time.Millisecond))
}

// thousandDo is buffer, then show: retry.Do around the whole stream, the
// text in a buffer of the attempt's own. Every call ends with the whole
// answer of the attempt that succeeded.
func thousandDo(t *testing.T, api streamAPI, calls int) {
	start := time.Now()
	f := newStreamFake(t, api, thousandPlan)
	client := newClient("sk-test", f.srv.URL+"/v1/", streamingTransport(llmStream()))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var attempts atomic.Int32
	results := runCalls(calls, func(id string) callResult {
		p := doPolicy(retrytest.NewFakeTime()) // a clock per call: the others' sleeps don't eat its deadline
		p.MaxAttempts = maxAttempts
		text, err := retry.Do(ctx, p, func(ctx context.Context) (string, error) {
			attempts.Add(1)
			var b strings.Builder
			_, err := api.read(ctx, client, id, &b)
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
	t.Logf("%s, Do around the stream: %d calls, %d attempts, %d failed, every answer whole and the fake's, in %v",
		api.name, calls, attempts.Load(), failed, time.Since(start).Round(time.Millisecond))
}
