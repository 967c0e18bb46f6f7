package retry

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The events below are as the APIs send them (the data of one event each).
const (
	anthropicMessageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`
	anthropicPing         = `{"type": "ping"}`
	anthropicBlockStart   = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	anthropicBlockDelta   = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`
	anthropicBlockStop    = `{"type":"content_block_stop","index":0}`
	anthropicMessageDelta = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`
	anthropicMessageStop  = `{"type":"message_stop"}`

	chatRoleOnly  = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	chatRoleNull  = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null},"logprobs":null,"finish_reason":null}]}`
	chatContent   = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}`
	chatQuoted    = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"\"Hi\""},"finish_reason":null}]}`
	chatToolCalls = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`
	chatRefusal   = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"refusal":"I can't"},"finish_reason":null}]}`
	chatFinish    = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	chatUsage     = `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`
	chatFilter    = `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`
	chatError     = `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`
	chatRateLimit = `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	chatQuota     = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	chatTooLong   = `{"error":{"message":"maximum context length","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`

	responsesCreated    = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"output":[]}}`
	responsesInProgress = `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"output":[]}}`
	responsesDelta      = `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","sequence_number":4}`
	responsesCompleted  = `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","error":null}}`
	responsesIncomplete = `{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`
	responsesError      = `{"type":"error","code":"server_error","message":"x","param":null,"sequence_number":1}`
	responsesFailed     = `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached"}}}`
	responsesFailed500  = `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error"}}}`
)

func anthropicError(typ string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"m"}}`
}

var (
	preamble = StreamEvent{Kind: EventPreamble}
	output   = StreamEvent{Kind: EventOutput}
	final    = StreamEvent{Kind: EventFinal}
)

func errorEvent(status int) StreamEvent { return StreamEvent{Kind: EventError, Status: status} }

func TestAnthropicEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  string
		data string
		want StreamEvent
	}{
		{name: "message_start", typ: "message_start", data: anthropicMessageStart, want: preamble},
		{name: "ping", typ: "ping", data: anthropicPing, want: preamble},
		{name: "content_block_start", typ: "content_block_start", data: anthropicBlockStart, want: preamble},
		{name: "content_block_delta", typ: "content_block_delta", data: anthropicBlockDelta, want: output},
		{name: "content_block_stop", typ: "content_block_stop", data: anthropicBlockStop, want: output},
		{name: "message_delta", typ: "message_delta", data: anthropicMessageDelta, want: output},
		{name: "message_stop", typ: "message_stop", data: anthropicMessageStop, want: final},
		{name: "overloaded_error", typ: "error", data: anthropicError("overloaded_error"), want: errorEvent(529)},
		{name: "rate_limit_error", typ: "error", data: anthropicError("rate_limit_error"), want: errorEvent(429)},
		{name: "api_error", typ: "error", data: anthropicError("api_error"), want: errorEvent(500)},
		{name: "invalid_request_error", typ: "error", data: anthropicError("invalid_request_error"), want: errorEvent(400)},
		{name: "unknown error type", typ: "error", data: anthropicError("brand_new_error"), want: errorEvent(0)},
		{name: "error that is not JSON", typ: "error", data: "Overloaded", want: errorEvent(0)},
		{name: "unknown event", typ: "thinking_delta_v9", data: `{}`, want: output},
		{name: "no type", typ: "", data: anthropicBlockDelta, want: output},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, AnthropicEvent(tt.typ, []byte(tt.data))); diff != "" {
				t.Errorf("AnthropicEvent(%q, %s) (-want +got):\n%s", tt.typ, tt.data, diff)
			}
		})
	}
}

// openAICases are OpenAI's events, chat completions and the Responses API.
var openAICases = []struct {
	name string
	typ  string
	data string
	want StreamEvent
}{
	{name: "chat: role-only first delta", data: chatRoleOnly, want: preamble},
	{name: "chat: role with null content and refusal", data: chatRoleNull, want: preamble},
	{name: "chat: content delta", data: chatContent, want: output},
	{name: "chat: content starting with an escaped quote", data: chatQuoted, want: output},
	{name: "chat: tool_calls delta", data: chatToolCalls, want: output},
	{name: "chat: refusal delta", data: chatRefusal, want: output},
	{name: "chat: empty delta with finish_reason", data: chatFinish, want: output},
	{name: "chat: usage-only chunk with empty choices", data: chatUsage, want: preamble},
	{name: "chat: Azure prompt filter results", data: chatFilter, want: preamble},
	{name: "chat: [DONE]", data: "[DONE]", want: final},
	{name: "chat: server_error", data: chatError, want: errorEvent(500)},
	{name: "chat: rate_limit_exceeded", data: chatRateLimit, want: errorEvent(429)},
	{name: "chat: insufficient_quota", data: chatQuota, want: errorEvent(429)},
	{name: "chat: context_length_exceeded", data: chatTooLong, want: errorEvent(400)},
	{name: "chat: unknown error", data: `{"error":{"message":"?","type":"mystery","code":null}}`, want: errorEvent(0)},
	{name: "chat: data that is not JSON", data: "hello", want: output},
	{name: "responses: response.created", typ: "response.created", data: responsesCreated, want: preamble},
	{name: "responses: response.queued", typ: "response.queued", data: `{"type":"response.queued"}`, want: preamble},
	{name: "responses: response.in_progress", typ: "response.in_progress", data: responsesInProgress, want: preamble},
	{name: "responses: response.output_text.delta", typ: "response.output_text.delta", data: responsesDelta, want: output},
	{name: "responses: response.completed", typ: "response.completed", data: responsesCompleted, want: final},
	{name: "responses: response.incomplete", typ: "response.incomplete", data: responsesIncomplete, want: final},
	{name: "responses: error event", typ: "error", data: responsesError, want: errorEvent(500)},
	{name: "responses: response.failed, rate limited", typ: "response.failed", data: responsesFailed, want: errorEvent(429)},
	{name: "responses: response.failed, server error", typ: "response.failed", data: responsesFailed500, want: errorEvent(500)},
	{name: "responses: unknown event", typ: "response.reasoning.delta", data: `{}`, want: output},
}

func TestOpenAIEvent(t *testing.T) {
	t.Parallel()
	for _, tt := range openAICases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, OpenAIEvent(tt.typ, []byte(tt.data))); diff != "" {
				t.Errorf("OpenAIEvent(%q, %s) (-want +got):\n%s", tt.typ, tt.data, diff)
			}
		})
	}
}

// LLMEvent is AnthropicEvent for Anthropic's types and OpenAIEvent for the
// rest: the same answers as each, on each API's own events.
func TestLLMEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  string
		data string
		want StreamEvent
	}{
		{name: "anthropic message_start", typ: "message_start", data: anthropicMessageStart, want: preamble},
		{name: "anthropic ping", typ: "ping", data: anthropicPing, want: preamble},
		{name: "anthropic content_block_start", typ: "content_block_start", data: anthropicBlockStart, want: preamble},
		{name: "anthropic content_block_delta", typ: "content_block_delta", data: anthropicBlockDelta, want: output},
		{name: "anthropic message_stop", typ: "message_stop", data: anthropicMessageStop, want: final},
		{name: "anthropic overloaded_error", typ: "error", data: anthropicError("overloaded_error"), want: errorEvent(529)},
		{name: "anthropic invalid_request_error", typ: "error", data: anthropicError("invalid_request_error"), want: errorEvent(400)},
	}
	for _, c := range openAICases {
		tests = append(tests, struct {
			name string
			typ  string
			data string
			want StreamEvent
		}{name: "openai " + c.name, typ: c.typ, data: c.data, want: c.want})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, LLMEvent(tt.typ, []byte(tt.data))); diff != "" {
				t.Errorf("LLMEvent(%q, %s) (-want +got):\n%s", tt.typ, tt.data, diff)
			}
		})
	}
}

func TestLLMErrorStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want int
	}{
		{name: "anthropic overloaded_error", data: anthropicError("overloaded_error"), want: 529},
		{name: "anthropic rate_limit_error", data: anthropicError("rate_limit_error"), want: 429},
		{name: "anthropic api_error", data: anthropicError("api_error"), want: 500},
		{name: "anthropic invalid_request_error", data: anthropicError("invalid_request_error"), want: 400},
		{name: "anthropic authentication_error", data: anthropicError("authentication_error"), want: 401},
		{name: "anthropic billing_error", data: anthropicError("billing_error"), want: 402},
		{name: "anthropic permission_error", data: anthropicError("permission_error"), want: 403},
		{name: "anthropic not_found_error", data: anthropicError("not_found_error"), want: 404},
		{name: "anthropic request_too_large", data: anthropicError("request_too_large"), want: 413},
		{name: "anthropic timeout_error", data: anthropicError("timeout_error"), want: 504},
		{name: "anthropic unknown type", data: anthropicError("brand_new_error"), want: 0},
		{name: "chat server_error, null code", data: chatError, want: 500},
		{name: "chat code before type", data: chatRateLimit, want: 429},
		{name: "chat insufficient_quota", data: chatQuota, want: 429},
		{name: "chat context_length_exceeded", data: chatTooLong, want: 400},
		{name: "chat unknown code, known type", data: `{"error":{"type":"server_error","code":"weird"}}`, want: 500},
		{name: "responses error event", data: responsesError, want: 500},
		{name: "responses response.failed", data: responsesFailed, want: 429},
		{name: "responses response.failed, server_error", data: responsesFailed500, want: 500},
		{name: "error that is a string", data: `{"error":"Internal error"}`, want: 0},
		{name: "numeric code", data: `{"error":{"code":500}}`, want: 0},
		{name: "type error with nothing else", data: `{"type":"error"}`, want: 0},
		{name: "not JSON", data: `event: error`, want: 0},
		{name: "empty", data: ``, want: 0},
		{name: "null", data: `null`, want: 0},
		{name: "array", data: `[{"error":{"type":"api_error"}}]`, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := llmErrorStatus([]byte(tt.data)); got != tt.want {
				t.Errorf("llmErrorStatus(%s) = %d, want %d", tt.data, got, tt.want)
			}
		})
	}
}

func TestEventKindString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind EventKind
		want string
	}{
		{kind: EventOutput, want: "output"},
		{kind: EventPreamble, want: "preamble"},
		{kind: EventFinal, want: "final"},
		{kind: EventError, want: "error"},
		{kind: EventKind(7), want: "EventKind(7)"},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.want {
			t.Errorf("EventKind(%d).String() = %q, want %q", int(tt.kind), got, tt.want)
		}
	}
}

func TestStreamErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  StreamError
		want string
	}{
		{
			name: "type and status",
			err:  StreamError{Event: "error", Data: []byte(`{"secret":"sk-123"}`), Status: 529},
			want: `retry: the event stream reported an error (event "error"): 529 Overloaded`,
		},
		{
			name: "no type",
			err:  StreamError{Data: []byte(chatError), Status: 500},
			want: "retry: the event stream reported an error: 500 Internal Server Error",
		},
		{
			name: "unknown status",
			err:  StreamError{Event: "response.failed", Data: []byte(`sk-123`)},
			want: `retry: the event stream reported an error (event "response.failed")`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsEventStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ct   string
		want bool
	}{
		{ct: "text/event-stream", want: true},
		{ct: "text/event-stream; charset=utf-8", want: true},
		{ct: "text/event-stream;charset=utf-8", want: true},
		{ct: "TEXT/EVENT-STREAM", want: true},
		{ct: "Text/Event-Stream ; charset=utf-8", want: true},
		{ct: "text/event-streamx", want: false},
		{ct: "text/event-strea", want: false},
		{ct: "application/json", want: false},
		{ct: "", want: false},
	}
	for _, tt := range tests {
		h := make(map[string][]string)
		if tt.ct != "" {
			h["Content-Type"] = []string{tt.ct}
		}
		if got := isEventStream(h); got != tt.want {
			t.Errorf("isEventStream(Content-Type: %q) = %v, want %v", tt.ct, got, tt.want)
		}
	}
}

// judged is one call of a Stream.Event.
type judged struct {
	Type string
	Data string
}

// recorder is a Stream.Event that records each call and answers as
// LLMEvent does.
type recorder struct {
	mu  sync.Mutex
	got []judged
}

func (r *recorder) judge(typ string, data []byte) StreamEvent {
	r.mu.Lock()
	r.got = append(r.got, judged{Type: typ, Data: string(data)})
	r.mu.Unlock()
	return LLMEvent(typ, data)
}

func (r *recorder) calls() []judged {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]judged(nil), r.got...)
}

// parserState is what an eventParser reports after a stream.
type parserState struct {
	Output, Final bool
	Err           *StreamError
}

func stateOf(p *eventParser) parserState {
	return parserState{Output: p.output, Final: p.final, Err: p.err}
}

// sameStreamError reports whether a and b are equal, both nil or not.
func sameStreamError(a, b *StreamError) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Event == b.Event && a.Status == b.Status && bytes.Equal(a.Data, b.Data)
}

// parseChunks feeds chunks to a new parser with max and returns what it
// judged and its state.
func parseChunks(max int, chunks ...string) ([]judged, parserState) {
	r := &recorder{}
	p := &eventParser{judge: r.judge, max: max}
	for _, c := range chunks {
		p.feed([]byte(c))
	}
	return r.calls(), stateOf(p)
}

// mixedStream is an Anthropic stream with every line ending, comments, a
// field without a space and one without a colon, and an unknown field.
var mixedStream = ": keep-alive\r\n" +
	"event: message_start\r\ndata: " + anthropicMessageStart + "\r\n\r\n" +
	"event: ping\rdata:" + anthropicPing + "\r\r" +
	"id: 7\nretry: 100\nevent: content_block_start\ndata: " + anthropicBlockStart + "\n\n" +
	": ping\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\ndata: \"index\":0}\n\n" +
	"event: message_stop\r\ndata\r\n\r\n" +
	"event: error\ndata: " + anthropicError("overloaded_error") + "\n\n" +
	"event: content_block_delta\ndata: " + anthropicBlockDelta + "\n\n"

func TestEventParserChunkingDoesNotMatter(t *testing.T) {
	t.Parallel()
	wantCalls := []judged{
		{Type: "message_start", Data: anthropicMessageStart},
		{Type: "ping", Data: anthropicPing},
		{Type: "content_block_start", Data: anthropicBlockStart},
		{Type: "content_block_delta", Data: "{\"type\":\"content_block_delta\",\n\"index\":0}"},
		{Type: "message_stop", Data: ""},
		{Type: "error", Data: anthropicError("overloaded_error")},
		// Nothing after the error is judged.
	}
	wantState := parserState{Output: true, Final: true,
		Err: &StreamError{Event: "error", Data: []byte(anthropicError("overloaded_error")), Status: 529}}
	check := func(t *testing.T, how string, chunks ...string) {
		t.Helper()
		calls, state := parseChunks(DefaultStreamReadAhead, chunks...)
		if !slices.Equal(wantCalls, calls) { // cmp.Diff only on failure: this runs thousands of times
			t.Fatalf("%s: events judged (-want +got):\n%s", how, cmp.Diff(wantCalls, calls))
		}
		if state.Output != wantState.Output || state.Final != wantState.Final || !sameStreamError(wantState.Err, state.Err) {
			t.Fatalf("%s: parser state (-want +got):\n%s", how, cmp.Diff(wantState, state))
		}
	}
	check(t, "whole", mixedStream)
	for i := range len(mixedStream) + 1 {
		check(t, "split at "+strconv.Itoa(i), mixedStream[:i], mixedStream[i:])
	}
	check(t, "byte by byte", strings.Split(mixedStream, "")...)
	for i := 0; i+2 <= len(mixedStream); i += 17 {
		for j := i + 1; j <= len(mixedStream); j += 23 {
			check(t, "split at "+strconv.Itoa(i)+" and "+strconv.Itoa(j),
				mixedStream[:i], "", mixedStream[i:j], mixedStream[j:])
		}
	}
}

func TestEventParserLines(t *testing.T) {
	t.Parallel()
	const max = 64
	tests := []struct {
		name   string
		chunks []string
		want   []judged
	}{
		{
			name:   "CRLF split between CR and LF",
			chunks: []string{"data: a\r", "\ndata: b\r\n\r", "\n"},
			want:   []judged{{Data: "a\nb"}},
		},
		{
			name:   "CR then CR is an empty line",
			chunks: []string{"data: a\r", "\r"},
			want:   []judged{{Data: "a"}},
		},
		{
			name:   "CR at the end of one chunk, empty chunk, LF",
			chunks: []string{"data: a\r", "", "\n", "\r\n"},
			want:   []judged{{Data: "a"}},
		},
		{
			name:   "LF then CR is two line ends",
			chunks: []string{"data: a\n\r"},
			want:   []judged{{Data: "a"}},
		},
		{
			name:   "event without data is not dispatched, and its type is dropped",
			chunks: []string{"event: error\n\n", "data: x\n\n"},
			want:   []judged{{Data: "x"}},
		},
		{
			name:   "event with only id and retry is not dispatched",
			chunks: []string{"event: error\nid: 1\nretry: 5\n\n"},
		},
		{
			name:   "comment-only event is not dispatched",
			chunks: []string{": ping\n\n:\n\n"},
		},
		{
			name:   "empty data line dispatches empty data",
			chunks: []string{"event: x\ndata\n\n", "data:\n\n"},
			want:   []judged{{Type: "x"}, {}},
		},
		{
			name:   "one space after the colon is dropped, a second kept",
			chunks: []string{"data:a\n\ndata:  b\n\n"},
			want:   []judged{{Data: "a"}, {Data: " b"}},
		},
		{
			name:   "the last event line wins; the type resets after dispatch",
			chunks: []string{"event: a\nevent: b\ndata: 1\n\ndata: 2\n\n"},
			want:   []judged{{Type: "b", Data: "1"}, {Data: "2"}},
		},
		{
			name:   "an event not ended by an empty line is not dispatched",
			chunks: []string{"data: a\n", "data: b"},
		},
		{
			name:   "unknown fields and fields with a colon in the value",
			chunks: []string{"foo: bar\ndata: a:b\n\n"},
			want:   []judged{{Data: "a:b"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _ := parseChunks(max, tt.chunks...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events judged (-want +got):\n%s", diff)
			}
		})
	}
}

// A line or an event's data longer than max is not judged: the event
// counts as output.
func TestEventParserTooLong(t *testing.T) {
	t.Parallel()
	const max = 32
	long := strings.Repeat("x", max+1)
	tests := []struct {
		name   string
		chunks []string
		want   []judged
		state  parserState
	}{
		{
			name:   "data line of max bytes is judged",
			chunks: []string{"event: ping\n", "data: " + strings.Repeat("y", max-6) + "\n\n"},
			want:   []judged{{Type: "ping", Data: strings.Repeat("y", max-6)}},
		},
		{
			name:   "long data line",
			chunks: []string{"event: error\ndata: ", long, "\n\n"},
			state:  parserState{Output: true},
		},
		{
			name:   "long data line in pieces",
			chunks: []string{"event: error\ndata: " + long[:10], long[10:20], long[20:] + "\n", "\n"},
			state:  parserState{Output: true},
		},
		{
			name:   "data lines that pass max together",
			chunks: []string{"event: error\ndata: " + long[:20] + "\ndata: " + long[:20] + "\n\n"},
			state:  parserState{Output: true},
		},
		{
			name:   "long comment line",
			chunks: []string{":" + long + "\n\n"},
			state:  parserState{Output: true},
		},
		{
			name: "short events after a long one are judged",
			chunks: []string{"event: ping\ndata: " + long + "\n\n",
				"event: error\ndata: " + anthropicError("api_error")[:20] + "\n\n"},
			want: []judged{{Type: "error", Data: anthropicError("api_error")[:20]}},
			state: parserState{Output: true,
				Err: &StreamError{Event: "error", Data: []byte(anthropicError("api_error")[:20])}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, state := parseChunks(max, tt.chunks...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events judged (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.state, state); diff != "" {
				t.Errorf("parser state (-want +got):\n%s", diff)
			}
		})
	}
}

// Without an Event, every dispatched event is output; data-less ones still
// are not dispatched.
func TestEventParserNilJudge(t *testing.T) {
	t.Parallel()
	p := &eventParser{max: 64}
	p.feed([]byte("event: error\n\n: ping\n\n"))
	if p.decided() {
		t.Fatalf("decided after events without data: %+v", stateOf(p))
	}
	p.feed([]byte("event: error\ndata: " + anthropicError("overloaded_error") + "\n\n"))
	if diff := cmp.Diff(parserState{Output: true}, stateOf(p)); diff != "" {
		t.Errorf("parser state (-want +got):\n%s", diff)
	}
}
