package retry

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"

	"github.com/retrykit/retry/internal/wire"
)

// LLMEvent is a Stream.Event for the event streams of OpenAI (chat
// completions and the Responses API) and Anthropic (Messages) alike, so
// that one client may serve both: it is [AnthropicEvent] for the event
// types Anthropic sends, and [OpenAIEvent] for all others.
func LLMEvent(typ string, data []byte) StreamEvent {
	if ev, ok := anthropicEvent(typ, data); ok {
		return ev
	}
	return OpenAIEvent(typ, data)
}

// AnthropicEvent is a Stream.Event for Anthropic's Messages streams.
// message_start, ping and content_block_start come before any output;
// message_stop is final; an error event stands for the status of its
// error type (overloaded_error 529, rate_limit_error 429, api_error 500,
// invalid_request_error 400, and so on). Every other event is output.
func AnthropicEvent(typ string, data []byte) StreamEvent {
	ev, _ := anthropicEvent(typ, data)
	return ev
}

// anthropicEvent judges an event of a type Anthropic sends, and reports
// false for any other type.
func anthropicEvent(typ string, data []byte) (StreamEvent, bool) {
	switch typ {
	case "message_start", "ping", "content_block_start":
		return StreamEvent{Kind: EventPreamble}, true
	case "content_block_delta", "content_block_stop", "message_delta":
		return StreamEvent{Kind: EventOutput}, true
	case "message_stop":
		return StreamEvent{Kind: EventFinal}, true
	case "error":
		return StreamEvent{Kind: EventError, Status: llmErrorStatus(data)}, true
	}
	return StreamEvent{}, false
}

// OpenAIEvent is a Stream.Event for OpenAI's streams: chat completions
// (data-only events, ended by data: [DONE]) and the Responses API (typed
// events). A chat chunk whose deltas carry nothing but a role, and the
// Responses API's response.created, response.queued and
// response.in_progress, come before any output; [DONE],
// response.completed and response.incomplete are final; a chunk with an
// "error" member, an error event and response.failed stand for the status
// of their error's code or type (server_error 500, rate_limit_exceeded
// 429, and so on). Every other event is output.
func OpenAIEvent(typ string, data []byte) StreamEvent {
	if bytes.Equal(data, []byte("[DONE]")) {
		return StreamEvent{Kind: EventFinal}
	}
	switch typ {
	case "":
		return chatEvent(data)
	case "response.created", "response.queued", "response.in_progress":
		return StreamEvent{Kind: EventPreamble}
	case "response.completed", "response.incomplete":
		return StreamEvent{Kind: EventFinal}
	case "error", "response.failed":
		return StreamEvent{Kind: EventError, Status: llmErrorStatus(data)}
	}
	return StreamEvent{Kind: EventOutput}
}

// chatEvent judges a chat completions chunk.
func chatEvent(data []byte) StreamEvent {
	// Most chunks carry text: "content":"x" with its quotes unescaped
	// stands only as a member, never inside a string.
	if i := bytes.Index(data, []byte(`"content":"`)); i >= 0 && i+11 < len(data) && data[i+11] != '"' {
		return StreamEvent{Kind: EventOutput}
	}
	var chunk struct {
		Error   json.RawMessage `json:"error"`
		Choices []struct {
			Delta        map[string]json.RawMessage `json:"delta"`
			FinishReason json.RawMessage            `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return StreamEvent{Kind: EventOutput} // not a chunk this knows: it commits
	}
	if !emptyJSON(chunk.Error) {
		return StreamEvent{Kind: EventError, Status: llmErrorStatus(data)}
	}
	for _, ch := range chunk.Choices {
		if !emptyJSON(ch.FinishReason) {
			return StreamEvent{Kind: EventOutput}
		}
		for k, v := range ch.Delta {
			if k != "role" && !emptyJSON(v) {
				return StreamEvent{Kind: EventOutput}
			}
		}
	}
	return StreamEvent{Kind: EventPreamble} // a role, usage, or nothing yet
}

// emptyJSON reports an absent member or one that holds nothing: null, "",
// [] or {}.
func emptyJSON(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", "null", `""`, "[]", "{}":
		return true
	}
	return false
}

// llmErrorStatus returns the HTTP status that an error event's data stands
// for, from the error's code or type in any of the shapes the LLM APIs
// send: {"error": {"type" or "code"}} (Anthropic, OpenAI chat), {"code"}
// (the Responses API's error event) or {"response": {"error": {"code"}}}
// (response.failed). It returns 0 for an error it does not know.
func llmErrorStatus(data []byte) int {
	type detail struct {
		Type any `json:"type"`
		Code any `json:"code"`
	}
	var ev struct {
		detail
		Error    json.RawMessage `json:"error"`
		Response struct {
			Error *detail `json:"error"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return 0
	}
	var inner detail
	_ = json.Unmarshal(ev.Error, &inner) // an error that is a string holds no code
	names := []any{inner.Code, inner.Type, ev.Code}
	if e := ev.Response.Error; e != nil {
		names = append(names, e.Code, e.Type)
	}
	if ev.Type != "error" {
		names = append(names, ev.Type)
	}
	for _, n := range names {
		if s, ok := n.(string); ok {
			if code := errorTypeStatus(s); code != 0 {
				return code
			}
		}
	}
	return 0
}

// errorTypeStatus maps the error types and codes of the LLM APIs to the
// status each API sends with them as a response.
func errorTypeStatus(name string) int {
	switch name {
	case "overloaded_error":
		return wire.StatusOverloaded
	case "rate_limit_error", "rate_limit_exceeded", "insufficient_quota", "requests", "tokens":
		return http.StatusTooManyRequests
	case "api_error", "server_error", "internal_error", "internal_server_error":
		return http.StatusInternalServerError
	case "service_unavailable", "overloaded":
		return http.StatusServiceUnavailable
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "invalid_request_error", "invalid_prompt", "context_length_exceeded":
		return http.StatusBadRequest
	case "authentication_error", "invalid_api_key":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	}
	return 0
}

// sdkStreamError finds, in err's chain, the error an SDK makes of an error
// event in a stream, and returns the event's data. The SDKs are not
// imported, so their errors are known by shape:
//
//   - anthropic-sdk-go's *anthropic.Error for an error event: a RawJSON
//     method and a StatusCode field holding the stream's own 2xx status (the
//     same type with a 4xx or 5xx is a status, which IsRetryable leaves to
//     the caller to turn into a StatusError);
//   - openai-go's *ssestream.StreamError: an Event field whose Data holds the
//     event's data.
func sdkStreamError(err error) ([]byte, bool) {
	var data []byte
	found := walkErrors(err, 0, func(e error) bool {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if !v.IsValid() || v.Kind() != reflect.Struct {
			return false
		}
		if rj, ok := e.(interface{ RawJSON() string }); ok {
			f, ok := fieldByName(v, "StatusCode")
			if ok && f.CanInt() && f.Int() >= 200 && f.Int() < 300 {
				data = []byte(rj.RawJSON())
				return true
			}
			return false
		}
		f, ok := fieldByName(v, "Event")
		if !ok || f.Kind() != reflect.Struct {
			return false
		}
		d, ok := fieldByName(f, "Data")
		if ok && d.Kind() == reflect.Slice && d.Type().Elem().Kind() == reflect.Uint8 {
			data = d.Bytes()
			return true
		}
		return false
	})
	return data, found
}

// fieldByName returns the field of struct v with that name, promoted ones
// included, and false when there is none or it lies behind a nil embedded
// pointer (where reflect.Value.FieldByName panics).
func fieldByName(v reflect.Value, name string) (reflect.Value, bool) {
	sf, ok := v.Type().FieldByName(name)
	if !ok {
		return reflect.Value{}, false
	}
	f, err := v.FieldByIndexErr(sf.Index)
	return f, err == nil
}

// streamRetryable judges, for LLMRetryable, an error that an event stream
// reported: the library's own StreamError or an SDK's error for the event.
// ok is false when err holds neither.
func streamRetryable(err error) (retry, ok bool) {
	var status int
	var data []byte
	if se, found := errors.AsType[*StreamError](err); found {
		status, data = se.Status, se.Data
	} else if data, found = sdkStreamError(err); found {
		status = llmErrorStatus(data)
	} else {
		return false, false
	}
	if status == http.StatusTooManyRequests && quotaExhausted(data) {
		return false, true
	}
	return retryableStatus(status), true
}
