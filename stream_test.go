package retry_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// sseEvent is one event on the wire: its type line, if any, its data line
// and the empty line that dispatches it.
func sseEvent(typ, data string) string {
	s := ""
	if typ != "" {
		s = "event: " + typ + "\n"
	}
	return s + "data: " + data + "\n\n"
}

// Whole streams, as the APIs send them.
var (
	sseAnthropicGood = sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}`) +
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		sseEvent("ping", `{"type": "ping"}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", world"}}`) +
		sseEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`) +
		sseEvent("message_stop", `{"type":"message_stop"}`)
	sseAnthropicStart = sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}`) +
		sseEvent("ping", `{"type": "ping"}`)
	sseAnthropicOutput = sseAnthropicStart +
		sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`)
	sseAnthropicStop = sseEvent("message_stop", `{"type":"message_stop"}`)

	sseChatGood = sseEvent("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`) +
		sseEvent("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`) +
		sseEvent("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) +
		sseEvent("", `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`) +
		sseEvent("", "[DONE]")
	sseChatServerError = sseEvent("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`) +
		sseEvent("", `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`)

	sseResponsesGood = sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null}}`) +
		sseEvent("response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null}}`) +
		sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello","sequence_number":2}`) +
		sseEvent("response.completed", `{"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","object":"response","status":"completed","error":null}}`)
	sseResponsesError = sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_2","object":"response","status":"in_progress","error":null}}`) +
		sseEvent("error", `{"type":"error","code":"server_error","message":"x","param":null,"sequence_number":1}`)
	sseResponsesFailed = sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_3","object":"response","status":"in_progress","error":null}}`) +
		sseEvent("response.in_progress", `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_3","object":"response","status":"in_progress","error":null}}`) +
		sseEvent("response.failed", `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_3","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error"}}}`)
	sseResponsesRateLimited = sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_4","object":"response","status":"in_progress","error":null}}`) +
		sseEvent("response.failed", `{"type":"response.failed","sequence_number":1,"response":{"id":"resp_4","object":"response","status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached"}}}`)
)

// sseAnthropicError is the start of an Anthropic stream, then an error
// event of type typ.
func sseAnthropicError(typ string) string {
	return sseAnthropicStart + sseEvent("error", `{"type":"error","error":{"type":"`+typ+`","message":"m"}}`)
}

// sseStep answers 200 with an event stream of body, and the given header
// pairs.
func sseStep(body string, headerPairs ...string) retrytest.Step {
	s := retrytest.Status(http.StatusOK, append([]string{"Content-Type", "text/event-stream"}, headerPairs...)...)
	s.Body = body
	return s
}

// sseTransport returns a Transport with an LLMEvent Stream and p on fake
// time, over a counting base of the test's own.
func sseTransport(t *testing.T, p retry.Policy) (*retry.Transport, *counting, *retrytest.FakeTime) {
	p, ft := fakePolicy(p)
	cb := &counting{base: newBase(t)}
	return &retry.Transport{Base: cb, Policy: p, Stream: &retry.Stream{Event: retry.LLMEvent}}, cb, ft
}

// readBody reads resp's body to its end, closes it, and returns what it
// read and the error that ended it (nil at a clean end).
func readBody(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// checkAllClosed checks that every response body the base handed out was
// closed: the discarded ones by the Transport, the last one by the test.
// An attempt that timed out closes its body in a goroutine of its own, so
// it waits up to a second for the count.
func checkAllClosed(t *testing.T, cb *counting) {
	t.Helper()
	for end := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		opened, closed := cb.opened.Load(), cb.closed.Load()
		if opened == closed {
			return
		}
		if time.Now().After(end) {
			t.Errorf("%d response bodies opened, %d closed", opened, closed)
			return
		}
	}
}

// wantStreamError checks that err is a *StreamError with status.
func wantStreamError(t *testing.T, err error, status int) *retry.StreamError {
	t.Helper()
	var se *retry.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("body error = %v (%T), want a *retry.StreamError", err, err)
	}
	if se.Status != status {
		t.Errorf("StreamError.Status = %d, want %d", se.Status, status)
	}
	return se
}

func TestTransportStreamRetriesErrorBeforeOutput(t *testing.T) {
	t.Parallel()
	apis := []struct {
		name string
		bad  string
		good string
	}{
		{name: "anthropic overloaded_error", bad: sseAnthropicError("overloaded_error"), good: sseAnthropicGood},
		{name: "anthropic api_error", bad: sseAnthropicError("api_error"), good: sseAnthropicGood},
		{name: "openai chat server_error", bad: sseChatServerError, good: sseChatGood},
		{name: "openai responses error event", bad: sseResponsesError, good: sseResponsesGood},
		{name: "openai responses response.failed", bad: sseResponsesFailed, good: sseResponsesGood},
	}
	for _, api := range apis {
		for _, method := range []string{"GET", "POST"} {
			t.Run(api.name+"/"+method, func(t *testing.T) {
				t.Parallel()
				srv := retrytest.NewServer(t, sseStep(api.bad), sseStep(api.bad), sseStep(api.good))
				tr, cb, ft := sseTransport(t, retry.Policy{})
				var payload []byte
				if method == "POST" {
					payload = []byte(`{"model":"m","stream":true}`)
					tr.Replayable = func(*http.Request) bool { return true }
				}
				resp, err := tr.RoundTrip(mustRequest(t, method, srv.URL, payload))
				if err != nil {
					t.Fatal(err)
				}
				got, err := readBody(resp)
				if err != nil {
					t.Errorf("reading the body: %v, want a clean end", err)
				}
				if got != api.good {
					t.Errorf("body (-want +got):\n%s", cmp.Diff(api.good, got))
				}
				if n := srv.Requests(); n != 3 {
					t.Errorf("server got %d requests, want 3", n)
				}
				for i, r := range srv.Received() {
					if string(r.Body) != string(payload) {
						t.Errorf("request %d body = %q, want %q", i+1, r.Body, payload)
					}
				}
				if n := len(ft.Sleeps()); n != 2 {
					t.Errorf("slept %d times, want 2", n)
				}
				checkAllClosed(t, cb)
			})
		}
	}
}

// A POST that may not run twice is sent again only after an error that
// proves it was not processed: a 429.
func TestTransportStreamBarePost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		bad          string
		header       http.Header
		wantRequests int
		wantStatus   int // of the StreamError the body ends with; 0: a clean end
	}{
		{name: "overloaded_error is not sent again", bad: sseAnthropicError("overloaded_error"),
			wantRequests: 1, wantStatus: 529},
		{name: "api_error is not sent again", bad: sseAnthropicError("api_error"),
			wantRequests: 1, wantStatus: 500},
		{name: "openai chat server_error is not sent again", bad: sseChatServerError,
			wantRequests: 1, wantStatus: 500},
		{name: "rate_limit_error is sent again", bad: sseAnthropicError("rate_limit_error"),
			wantRequests: 2},
		{name: "response.failed rate_limit_exceeded is sent again", bad: sseResponsesRateLimited,
			wantRequests: 2},
		{name: "overloaded_error with an Idempotency-Key is sent again", bad: sseAnthropicError("overloaded_error"),
			header: http.Header{"Idempotency-Key": {"k1"}}, wantRequests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, sseStep(tt.bad), sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			req := mustRequest(t, "POST", srv.URL, []byte(`{"stream":true}`))
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readBody(resp)
			if n := srv.Requests(); n != tt.wantRequests {
				t.Errorf("server got %d requests, want %d", n, tt.wantRequests)
			}
			if tt.wantStatus == 0 {
				if err != nil || got != sseAnthropicGood {
					t.Errorf("body = %q, %v; want the good stream and a clean end", got, err)
				}
			} else {
				if got != tt.bad {
					t.Errorf("body before the error (-want +got):\n%s", cmp.Diff(tt.bad, got))
				}
				wantStreamError(t, err, tt.wantStatus)
			}
			checkAllClosed(t, cb)
		})
	}
}

// An error that will not pass, or that the Stream does not know, is handed
// over with the response: the caller reads the stream, then the error.
func TestTransportStreamHandsOverErrorsThatWillNotPass(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		stream     string
		policy     retry.Policy
		wantStatus int
	}{
		{name: "invalid_request_error", stream: sseAnthropicError("invalid_request_error"), wantStatus: 400},
		{name: "authentication_error", stream: sseAnthropicError("authentication_error"), wantStatus: 401},
		{name: "unknown error type", stream: sseAnthropicError("brand_new_error"), wantStatus: 0},
		{name: "error with unknown JSON", stream: sseAnthropicStart + sseEvent("error", `{"oops":[1,2,3]}`), wantStatus: 0},
		{name: "error that is not JSON", stream: sseEvent("error", "Internal Server Error"), wantStatus: 0},
		{name: "openai chat context_length_exceeded",
			stream:     sseEvent("", `{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`),
			wantStatus: 400},
		{name: "insufficient_quota, judged by LLMRetryable",
			stream:     sseEvent("", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`),
			policy:     retry.Policy{Retryable: retry.LLMRetryable},
			wantStatus: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, sseStep(tt.stream), sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, tt.policy)
			resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			got, err := readBody(resp)
			if got != tt.stream {
				t.Errorf("body before the error (-want +got):\n%s", cmp.Diff(tt.stream, got))
			}
			se := wantStreamError(t, err, tt.wantStatus)
			if se.Event == "" && !strings.HasPrefix(tt.stream, "data: ") {
				t.Errorf("StreamError.Event is empty")
			}
			if retry.LLMRetryable(err) {
				t.Errorf("LLMRetryable(%v) = true, want false", err)
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
			checkAllClosed(t, cb)
		})
	}
}

// gatedStream answers with head, flushed, then waits until gate closes (or
// the client goes away) to send tail.
func gatedStream(head, tail string, gate <-chan struct{}) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, head)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, tail)
	}
}

// An error after the first output is the caller's to see: the body reads
// every byte up to and including the error event, then the error.
func TestTransportStreamErrorAfterOutput(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	errEvent := sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	srv := retrytest.NewServer(t, retrytest.Step{Func: gatedStream(sseAnthropicOutput, errEvent, gate)},
		sseStep(sseAnthropicGood))
	tr, cb, _ := sseTransport(t, retry.Policy{})
	resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	close(gate) // only now: the response came back at the first output
	if err != nil {
		t.Fatal(err)
	}
	// Small reads: the error comes with the read after the event's last
	// byte, never with the event's bytes missing.
	var got []byte
	buf := make([]byte, 5)
	for {
		n, rerr := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		if rerr != nil {
			err = rerr
			break
		}
	}
	resp.Body.Close()
	if want := sseAnthropicOutput + errEvent; string(got) != want {
		t.Errorf("body (-want +got):\n%s", cmp.Diff(want, string(got)))
	}
	se := wantStreamError(t, err, 529)
	if se.Event != "error" || !bytes.Contains(se.Data, []byte("overloaded_error")) {
		t.Errorf("StreamError = %+v, want the overloaded_error event", se)
	}
	if !retry.IsRetryable(err) || !retry.LLMRetryable(err) {
		t.Errorf("IsRetryable = %v, LLMRetryable = %v; want both true", retry.IsRetryable(err), retry.LLMRetryable(err))
	}
	if !retry.IsRetryable(fmt.Errorf("stream: %w", err)) {
		t.Errorf("IsRetryable(wrapped %v) = false, want true", err)
	}
	if n := srv.Requests(); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
	checkAllClosed(t, cb)
}

// An error event that follows the first output in the same read of the
// read-ahead came after output too: it is handed over, never retried (a
// bare POST is not sent again on a 429 that, after output, proves
// nothing). Commit 9dd40ec judged it as an error met before output.
func TestTransportStreamErrorAfterOutputInTheSameRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		errEv  string
		status int
	}{
		{name: "overloaded_error on a GET", method: "GET", status: 529,
			errEv: sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
		{name: "rate_limit_error on a bare POST", method: "POST", status: 429,
			errEv: sseEvent("error", `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bad := sseAnthropicOutput + tt.errEv // one write: one read
			srv := retrytest.NewServer(t, sseStep(bad), sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			var payload []byte
			if tt.method == "POST" {
				payload = []byte(`{"stream":true}`)
			}
			resp, err := tr.RoundTrip(mustRequest(t, tt.method, srv.URL, payload))
			if err != nil {
				t.Fatal(err)
			}
			got, err := readBody(resp)
			if n := srv.Requests(); n != 1 {
				t.Errorf("server got %d requests, want 1: the error came after output", n)
			}
			if got != bad {
				t.Errorf("body (-want +got):\n%s", cmp.Diff(bad, got))
			}
			var se *retry.StreamError
			if !errors.As(err, &se) || se.Status != tt.status {
				t.Errorf("body error = %v, want a *StreamError with status %d", err, tt.status)
			}
			checkAllClosed(t, cb)
		})
	}
}

func TestTransportStreamEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		step    retrytest.Step
		want    string
		wantErr error // nil: a clean end
	}{
		{name: "final event", step: sseStep(sseAnthropicOutput + sseAnthropicStop), want: sseAnthropicOutput + sseAnthropicStop},
		{name: "cut after output", step: sseStep(sseAnthropicOutput), want: sseAnthropicOutput, wantErr: io.ErrUnexpectedEOF},
		{name: "cut after output, chunked",
			step: retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, sseAnthropicOutput)
				_ = http.NewResponseController(w).Flush()
			}},
			want: sseAnthropicOutput, wantErr: io.ErrUnexpectedEOF},
		{name: "[DONE] ends a chat stream", step: sseStep(sseChatGood), want: sseChatGood},
		{name: "chat stream cut before [DONE]", step: sseStep(strings.TrimSuffix(sseChatGood, sseEvent("", "[DONE]"))),
			want: strings.TrimSuffix(sseChatGood, sseEvent("", "[DONE]")), wantErr: io.ErrUnexpectedEOF},
		{name: "final event without its empty line", step: sseStep(sseAnthropicOutput + "event: message_stop\ndata: {}\n"),
			want: sseAnthropicOutput + "event: message_stop\ndata: {}\n", wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.step, sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, err := readBody(resp)
			if got != tt.want {
				t.Errorf("body (-want +got):\n%s", cmp.Diff(tt.want, got))
			}
			if tt.wantErr == nil && err != nil {
				t.Errorf("body error = %v, want a clean end", err)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("body error = %v, want one wrapping %v", err, tt.wantErr)
				}
				if !retry.IsRetryable(err) || !retry.LLMRetryable(err) {
					t.Errorf("IsRetryable and LLMRetryable(%v) = %v, %v; want both true", err,
						retry.IsRetryable(err), retry.LLMRetryable(err))
				}
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
			checkAllClosed(t, cb)
		})
	}
}

// A stream that breaks before its first output was never seen: it is sent
// again when the request may run twice.
func TestTransportStreamCutBeforeOutput(t *testing.T) {
	t.Parallel()
	emptyChunked := retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_ = http.NewResponseController(w).Flush()
	}}
	reset := sseStep(sseAnthropicStart)
	reset.ResetAfter = int64(len(sseAnthropicStart))
	tests := []struct {
		name         string
		method       string
		cut          retrytest.Step
		wantRequests int
		wantErr      error // nil: the good stream
	}{
		{name: "GET, ended", method: "GET", cut: sseStep(sseAnthropicStart), wantRequests: 2},
		{name: "GET, ended with nothing", method: "GET", cut: emptyChunked, wantRequests: 2},
		{name: "GET, reset", method: "GET", cut: reset, wantRequests: 2},
		{name: "bare POST, ended", method: "POST", cut: sseStep(sseAnthropicStart), wantRequests: 1,
			wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.cut, sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			var payload []byte
			if tt.method == "POST" {
				payload = []byte(`{"stream":true}`)
			}
			resp, err := tr.RoundTrip(mustRequest(t, tt.method, srv.URL, payload))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("RoundTrip error = %v, want one wrapping %v", err, tt.wantErr)
				}
				if resp != nil {
					resp.Body.Close()
					t.Errorf("RoundTrip returned a response with the error")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got, err := readBody(resp); got != sseAnthropicGood || err != nil {
					t.Errorf("body = %q, %v; want the good stream, clean", got, err)
				}
			}
			if n := srv.Requests(); n != tt.wantRequests {
				t.Errorf("server got %d requests, want %d", n, tt.wantRequests)
			}
			checkAllClosed(t, cb)
		})
	}
}

// dribble answers with body in flushed writes of 1 to 7 bytes.
func dribble(body string) retrytest.Step {
	return retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i, n := 0, 1; i < len(body); n = n%7 + 1 {
			end := min(i+n, len(body))
			if _, err := io.WriteString(w, body[i:end]); err != nil || rc.Flush() != nil {
				return
			}
			i = end
		}
	}}
}

// writerOnly hides a writer's ReadFrom, so that io.Copy reads the body
// through its WriteTo and the body's own Read.
type writerOnly struct{ io.Writer }

func TestTransportStreamDeliversByteForByte(t *testing.T) {
	t.Parallel()
	endings := []struct {
		name string
		eol  string
	}{
		{name: "LF", eol: "\n"},
		{name: "CRLF", eol: "\r\n"},
		{name: "CR", eol: "\r"},
	}
	reads := []struct {
		name string
		read func(io.Reader) ([]byte, error)
	}{
		{name: "ReadAll", read: io.ReadAll},
		{name: "io.Copy into a bytes.Buffer", read: func(r io.Reader) ([]byte, error) {
			var b bytes.Buffer
			_, err := io.Copy(&b, r)
			return b.Bytes(), err
		}},
		{name: "io.Copy into a plain Writer", read: func(r io.Reader) ([]byte, error) {
			var b bytes.Buffer
			_, err := io.Copy(writerOnly{&b}, r)
			return b.Bytes(), err
		}},
		{name: "1-byte reads", read: func(r io.Reader) ([]byte, error) { return readBy(r, 1) }},
		{name: "3-byte reads", read: func(r io.Reader) ([]byte, error) { return readBy(r, 3) }},
	}
	for _, e := range endings {
		// Comments, a field without its space, and the APIs' own events.
		eol := func(s string) string { return strings.ReplaceAll(s, "\n", e.eol) }
		bad := eol(": ping\n\n" + sseAnthropicError("overloaded_error"))
		good := eol(": ping\n\n" + sseAnthropicStart + ": keep-alive\n\n" + "event: content_block_delta\ndata:" +
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
			sseAnthropicStop)
		for _, r := range reads {
			for _, idle := range []time.Duration{0, time.Minute} {
				name := e.name + "/" + r.name
				if idle > 0 {
					name += "/BodyIdleTimeout"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					srv := retrytest.NewServer(t, dribble(bad), dribble(good))
					tr, cb, _ := sseTransport(t, retry.Policy{})
					tr.BodyIdleTimeout = idle
					resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
					if err != nil {
						t.Fatal(err)
					}
					got, err := r.read(resp.Body)
					resp.Body.Close()
					if err != nil {
						t.Errorf("reading the body: %v", err)
					}
					if string(got) != good {
						t.Errorf("body (-want +got):\n%s", cmp.Diff(good, string(got)))
					}
					if n := srv.Requests(); n != 2 {
						t.Errorf("server got %d requests, want 2", n)
					}
					checkAllClosed(t, cb)
				})
			}
		}
	}
}

// readBy reads r to its end n bytes at a time.
func readBy(r io.Reader, n int) ([]byte, error) {
	var got []byte
	buf := make([]byte, n)
	for {
		k, err := r.Read(buf)
		got = append(got, buf[:k]...)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
}

// Without an Event, every event is output and none is final.
func TestTransportStreamNilEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		step retrytest.Step
		want string
	}{
		{name: "events without a final one", step: sseStep("data: a\n\ndata: b\n\n"), want: "data: a\n\ndata: b\n\n"},
		{name: "an error event is output", step: sseStep(sseAnthropicError("overloaded_error")),
			want: sseAnthropicError("overloaded_error")},
		{name: "no events", step: sseStep(": ping\n\n"), want: ": ping\n\n"},
		{name: "empty, chunked", step: retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_ = http.NewResponseController(w).Flush()
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.step, sseStep("data: second\n\n"))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			tr.Stream = &retry.Stream{}
			resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := readBody(resp); got != tt.want || err != nil {
				t.Errorf("body = %q, %v; want %q, clean", got, err, tt.want)
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
			checkAllClosed(t, cb)
		})
	}
	t.Run("commits at the first event", func(t *testing.T) {
		t.Parallel()
		gate := make(chan struct{})
		srv := retrytest.NewServer(t, retrytest.Step{Func: gatedStream(": hi\n\ndata: a\n\n", "data: b\n\n", gate)})
		tr, cb, _ := sseTransport(t, retry.Policy{})
		tr.Stream = &retry.Stream{}
		resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
		close(gate)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readBody(resp); got != ": hi\n\ndata: a\n\ndata: b\n\n" || err != nil {
			t.Errorf("body = %q, %v; want both events, clean", got, err)
		}
		checkAllClosed(t, cb)
	})
}

func TestTransportStreamReadAhead(t *testing.T) {
	t.Parallel()
	const limit = 256
	bigText := strings.Repeat("word ", 200)
	bigDelta := sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+bigText+`"}}`)
	manyPings := strings.Repeat(sseEvent("ping", `{"type": "ping"}`), 10)
	bigError := sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"`+bigText+`"}}`)
	tests := []struct {
		name       string
		stream     string
		wantStatus int  // of the StreamError the body ends with
		wantCut    bool // the body ends with io.ErrUnexpectedEOF
	}{
		{name: "an event larger than ReadAhead", stream: sseAnthropicStart + bigDelta + sseAnthropicStop},
		{name: "a preamble longer than ReadAhead, then an error", stream: manyPings + sseAnthropicError("overloaded_error"),
			wantStatus: 529},
		{name: "an error event larger than ReadAhead is not judged", stream: sseAnthropicStart + bigError, wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, dribble(tt.stream), sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			tr.Stream.ReadAhead = limit
			resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, err := readBody(resp)
			if got != tt.stream {
				t.Errorf("body (-want +got):\n%s", cmp.Diff(tt.stream, got))
			}
			switch {
			case tt.wantStatus != 0:
				wantStreamError(t, err, tt.wantStatus)
			case tt.wantCut:
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("body error = %v, want io.ErrUnexpectedEOF", err)
				}
			case err != nil:
				t.Errorf("body error = %v, want a clean end", err)
			}
			if n := srv.Requests(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
			checkAllClosed(t, cb)
		})
	}
}

// The first output must come within the attempt timeout, as the headers
// must. Attempt timeouts run in real time: 50ms, with wide bounds.
func TestTransportStreamAttemptTimeout(t *testing.T) {
	t.Parallel()
	silent := sseStep("")
	silent.Stall = true
	slowStart := sseStep(sseAnthropicStart)
	slowStart.Stall = true
	const timeout = 50 * time.Millisecond
	t.Run("retried", func(t *testing.T) {
		for _, step := range []struct {
			name string
			step retrytest.Step
		}{{"headers then silence", silent}, {"a preamble then silence", slowStart}} {
			t.Run(step.name, func(t *testing.T) {
				t.Parallel()
				srv := retrytest.NewServer(t, step.step, sseStep(sseAnthropicGood))
				tr, cb, _ := sseTransport(t, retry.Policy{AttemptTimeout: timeout})
				start := time.Now()
				resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := readBody(resp); got != sseAnthropicGood || err != nil {
					t.Errorf("body = %q, %v; want the good stream", got, err)
				}
				if took < timeout || took > 5*time.Second {
					t.Errorf("took %v, want about the %v attempt timeout", took, timeout)
				}
				if n := srv.Requests(); n != 2 {
					t.Errorf("server got %d requests, want 2", n)
				}
				checkAllClosed(t, cb)
			})
		}
	})
	t.Run("never hangs", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewServer(t, silent)
		tr, cb, _ := sseTransport(t, retry.Policy{AttemptTimeout: timeout, MaxAttempts: 2})
		start := time.Now()
		resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
		took := time.Since(start)
		if resp != nil {
			resp.Body.Close()
		}
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 2 || !retry.IsRetryable(re.Err) {
			t.Errorf("RoundTrip = %v, want a *retry.Error after 2 attempts", err)
		}
		if took < 2*timeout || took > 5*time.Second {
			t.Errorf("took %v, want about two %v attempt timeouts", took, timeout)
		}
		checkAllClosed(t, cb)
	})
}

// A request that cannot be sent again is not held back: the caller gets
// the response at once, and its body still reports the error.
func TestTransportStreamWithoutRewind(t *testing.T) {
	t.Parallel()
	errEvent := sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	t.Run("no GetBody", func(t *testing.T) {
		t.Parallel()
		gate := make(chan struct{})
		srv := retrytest.NewServer(t, retrytest.Step{Func: gatedStream(sseAnthropicStart, errEvent, gate)},
			sseStep(sseAnthropicGood))
		tr, cb, _ := sseTransport(t, retry.Policy{AttemptTimeout: 5 * time.Second})
		tr.Replayable = func(*http.Request) bool { return true }
		req := mustRequest(t, "POST", srv.URL, nil)
		req.Body = io.NopCloser(strings.NewReader(`{"stream":true}`))
		req.ContentLength = int64(len(`{"stream":true}`))
		req.GetBody = nil
		start := time.Now()
		resp, err := tr.RoundTrip(req) // returns before the server sends any output
		took := time.Since(start)
		close(gate)
		if err != nil {
			t.Fatal(err)
		}
		if took > 4*time.Second {
			t.Errorf("RoundTrip took %v: the stream was held back", took)
		}
		got, err := readBody(resp)
		if want := sseAnthropicStart + errEvent; got != want {
			t.Errorf("body (-want +got):\n%s", cmp.Diff(want, got))
		}
		wantStreamError(t, err, 529)
		if n := srv.Requests(); n != 1 {
			t.Errorf("server got %d requests, want 1", n)
		}
		checkAllClosed(t, cb)
	})
	t.Run("no GetBody, with a ReplayBuffer", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewServer(t, sseStep(sseAnthropicError("overloaded_error")), sseStep(sseAnthropicGood))
		tr, cb, _ := sseTransport(t, retry.Policy{})
		tr.Replayable = func(*http.Request) bool { return true }
		tr.ReplayBuffer = 1 << 10
		req := mustRequest(t, "POST", srv.URL, nil)
		req.Body = io.NopCloser(strings.NewReader(`{"stream":true}`))
		req.ContentLength = int64(len(`{"stream":true}`))
		req.GetBody = nil
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readBody(resp); got != sseAnthropicGood || err != nil {
			t.Errorf("body = %q, %v; want the good stream", got, err)
		}
		var bodies []string
		for _, r := range srv.Received() {
			bodies = append(bodies, string(r.Body))
		}
		if diff := cmp.Diff([]string{`{"stream":true}`, `{"stream":true}`}, bodies); diff != "" {
			t.Errorf("request bodies (-want +got):\n%s", diff)
		}
		checkAllClosed(t, cb)
	})
}

func TestTransportStreamBodyIdleTimeout(t *testing.T) {
	t.Parallel()
	stalled := sseStep(sseAnthropicOutput)
	stalled.Stall = true
	srv := retrytest.NewServer(t, stalled)
	tr, cb, _ := sseTransport(t, retry.Policy{})
	tr.BodyIdleTimeout = 50 * time.Millisecond
	resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := readBody(resp)
	if got != sseAnthropicOutput {
		t.Errorf("body (-want +got):\n%s", cmp.Diff(sseAnthropicOutput, got))
	}
	if !errors.Is(err, retry.ErrBodyIdle) {
		t.Errorf("body error = %v, want one wrapping ErrBodyIdle", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the idle body failed after %v, want about 50ms", d)
	}
	checkAllClosed(t, cb)
}

func TestTransportStreamNegativeReadAhead(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, sseStep(sseAnthropicGood))
	tr, cb, _ := sseTransport(t, retry.Policy{})
	tr.Stream.ReadAhead = -1
	body := &closeCounter{Reader: strings.NewReader("x")}
	req := mustRequest(t, "POST", srv.URL, nil)
	req.Body = body
	resp, err := tr.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
		t.Errorf("got a response with status %d, want none", resp.StatusCode)
	}
	if !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("RoundTrip = %v, want an error wrapping ErrInvalidPolicy", err)
	}
	if n := cb.calls.Load(); n != 0 {
		t.Errorf("made %d attempts, want none", n)
	}
	if n := body.closed.Load(); n != 1 {
		t.Errorf("request body closed %d times, want 1", n)
	}
}

// Only a 2xx text/event-stream response is held back and judged.
func TestTransportStreamContentTypes(t *testing.T) {
	t.Parallel()
	bad := sseAnthropicError("overloaded_error")
	tests := []struct {
		name         string
		contentType  string
		status       int
		wantRequests int
	}{
		{name: "text/event-stream", contentType: "text/event-stream", wantRequests: 2},
		{name: "with a charset", contentType: "text/event-stream; charset=utf-8", wantRequests: 2},
		{name: "upper case", contentType: "TEXT/EVENT-STREAM", wantRequests: 2},
		{name: "a longer type", contentType: "text/event-streamx", wantRequests: 1},
		{name: "JSON", contentType: "application/json", wantRequests: 1},
		{name: "none", contentType: "", wantRequests: 1},
		{name: "201 event stream", contentType: "text/event-stream", status: 201, wantRequests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			first := retrytest.Step{Status: tt.status, Body: bad,
				Header: http.Header{"Content-Type": {tt.contentType}}}
			srv := retrytest.NewServer(t, first, sseStep(sseAnthropicGood))
			tr, cb, _ := sseTransport(t, retry.Policy{})
			resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, err := readBody(resp)
			want := bad
			if tt.wantRequests == 2 {
				want = sseAnthropicGood
			}
			if got != want || err != nil {
				t.Errorf("body = %q, %v; want %q, clean", got, err, want)
			}
			if n := srv.Requests(); n != tt.wantRequests {
				t.Errorf("server got %d requests, want %d", n, tt.wantRequests)
			}
			checkAllClosed(t, cb)
		})
	}
	t.Run("JSON body intact", func(t *testing.T) {
		t.Parallel()
		const body = `{"id":"msg_1","content":[{"type":"text","text":"Hello"}]}`
		srv := retrytest.NewServer(t, retrytest.Step{Body: body, Header: http.Header{"Content-Type": {"application/json"}}})
		tr, _, _ := sseTransport(t, retry.Policy{})
		resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readBody(resp); got != body || err != nil {
			t.Errorf("body = %q, %v; want %q, clean", got, err, body)
		}
	})
}

// The error event is judged as its status, with the response's own hints:
// Retry-After, and the event's data as the StatusError's Body.
func TestTransportStreamJudgesErrorAsStatus(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t,
		sseStep(sseAnthropicError("overloaded_error"), "Retry-After", "3"),
		sseStep(sseAnthropicGood))
	var mu sync.Mutex
	var events []retry.Event
	tr, cb, ft := sseTransport(t, retry.Policy{OnRetry: func(e retry.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readBody(resp); got != sseAnthropicGood || err != nil {
		t.Errorf("body = %q, %v; want the good stream", got, err)
	}
	if diff := cmp.Diff([]time.Duration{3 * time.Second}, ft.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 {
		t.Fatalf("got %d retry events, want 1", len(events))
	}
	var se *retry.StatusError
	if !errors.As(events[0].Err, &se) {
		t.Fatalf("retry event error = %v, want a *StatusError", events[0].Err)
	}
	wantBody := `{"type":"error","error":{"type":"overloaded_error","message":"m"}}`
	if se.StatusCode != 529 || se.RetryAfter != 3*time.Second || string(se.Body) != wantBody || !events[0].FromRetryAfter {
		t.Errorf("retry event = %+v with %+v; want 529, Retry-After 3s, Body %s", events[0], se, wantBody)
	}
	checkAllClosed(t, cb)
}

// When the attempts run out, the last stream is handed over as it came.
func TestTransportStreamGivesUpWithTheLastStream(t *testing.T) {
	t.Parallel()
	bad := sseAnthropicError("overloaded_error")
	srv := retrytest.NewServer(t, sseStep(bad))
	tr, cb, _ := sseTransport(t, retry.Policy{MaxAttempts: 3})
	resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readBody(resp)
	if got != bad {
		t.Errorf("body (-want +got):\n%s", cmp.Diff(bad, got))
	}
	wantStreamError(t, err, 529)
	if n := srv.Requests(); n != 3 {
		t.Errorf("server got %d requests, want 3", n)
	}
	checkAllClosed(t, cb)
}

// anthropicLikeError has the shape of anthropic-sdk-go's apierror.Error.
type anthropicLikeError struct {
	StatusCode int
	raw        string
}

func (e *anthropicLikeError) Error() string   { return fmt.Sprintf("%d %s", e.StatusCode, e.raw) }
func (e *anthropicLikeError) RawJSON() string { return e.raw }

// openAILikeStreamError has the shape of openai-go's ssestream.StreamError.
type openAILikeStreamError struct {
	Message string
	Event   struct {
		Type string
		Data []byte
	}
}

func (e *openAILikeStreamError) Error() string { return e.Message }

func openAILike(data string) *openAILikeStreamError {
	e := &openAILikeStreamError{Message: "received error while streaming"}
	e.Event.Data = []byte(data)
	return e
}

func TestLLMRetryableSDKStreamErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "anthropic overloaded_error in a 200 stream",
			err:  &anthropicLikeError{StatusCode: 200, raw: `{"type":"error","error":{"type":"overloaded_error"}}`},
			want: true},
		{name: "anthropic api_error in a 200 stream",
			err:  &anthropicLikeError{StatusCode: 200, raw: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`},
			want: true},
		{name: "anthropic invalid_request_error in a 200 stream",
			err:  &anthropicLikeError{StatusCode: 200, raw: `{"type":"error","error":{"type":"invalid_request_error"}}`},
			want: false},
		{name: "anthropic shape with status 529 is left to IsRetryable",
			err:  &anthropicLikeError{StatusCode: 529, raw: `{"type":"error","error":{"type":"overloaded_error"}}`},
			want: false},
		{name: "openai server_error",
			err:  openAILike(`{"error":{"type":"server_error"}}`),
			want: true},
		{name: "openai rate_limit_exceeded",
			err:  openAILike(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`),
			want: true},
		{name: "openai insufficient_quota",
			err:  openAILike(`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`),
			want: false},
		{name: "openai response.failed",
			err:  openAILike(`{"type":"response.failed","response":{"error":{"code":"server_error"}}}`),
			want: true},
		{name: "openai unknown error",
			err:  openAILike(`{"error":{"type":"mystery"}}`),
			want: false},
		{name: "StreamError 429 with insufficient_quota",
			err:  &retry.StreamError{Status: 429, Data: []byte(`{"error":{"type":"insufficient_quota"}}`)},
			want: false},
		{name: "StreamError 429", err: &retry.StreamError{Status: 429, Data: []byte(`{"error":{"type":"requests"}}`)},
			want: true},
		{name: "StreamError 400", err: &retry.StreamError{Status: 400}, want: false},
		{name: "StreamError of unknown status", err: &retry.StreamError{}, want: false},
	}
	for _, tt := range tests {
		for _, wrapped := range []bool{false, true} {
			name, err := tt.name, tt.err
			if wrapped {
				name, err = name+", wrapped", fmt.Errorf("streaming: %w", err)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if got := retry.LLMRetryable(err); got != tt.want {
					t.Errorf("LLMRetryable(%v) = %v, want %v", err, got, tt.want)
				}
			})
		}
	}
}

// The same over HTTP/2, whose response bodies net/http makes otherwise.
func TestTransportStreamOverHTTP2(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewTLSServer(t, dribble(sseAnthropicError("overloaded_error")), sseStep(sseAnthropicGood))
	base := srv.Client().Transport.(*http.Transport)
	t.Cleanup(base.CloseIdleConnections)
	p, _ := fakePolicy(retry.Policy{})
	cb := &counting{base: base}
	tr := &retry.Transport{Base: cb, Policy: p, Stream: &retry.Stream{Event: retry.LLMEvent}}
	resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("proto = %s, want HTTP/2", resp.Proto)
	}
	if got, err := readBody(resp); got != sseAnthropicGood || err != nil {
		t.Errorf("body = %q, %v; want the good stream", got, err)
	}
	if n := srv.Requests(); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
	}
	checkAllClosed(t, cb)
}

// TestTransportStreamEmptyWithContentLengthZeroIsNotWhole is the bug where
// an event stream with Content-Length: 0, whose body net/http makes
// http.NoBody, skips the Stream: it is handed over as a whole, empty
// stream with a clean io.EOF, though no final event came, while the same
// empty stream sent chunked is a cut and is retried.
func TestTransportStreamEmptyWithContentLengthZeroIsNotWhole(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, sseStep(""), sseStep(sseAnthropicGood)) // Content-Length: 0, then a stream
	p, _ := fakePolicy(retry.Policy{})
	tr := &retry.Transport{Base: newBase(t), Policy: p, Stream: &retry.Stream{Event: retry.LLMEvent}}
	resp, err := tr.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readBody(resp)
	if n := srv.Requests(); n != 2 || got != sseAnthropicGood || err != nil {
		t.Errorf("after %d requests, body = %q, %v; want the good stream after 2, "+
			"as for an empty chunked stream", n, got, err)
	}
}

// nilEmbedError embeds a pointer to a struct with a StatusCode field, as
// an error type that embeds *http.Response does, and has a RawJSON method.
type nilEmbedError struct{ *http.Response }

func (e *nilEmbedError) Error() string   { return "api error" }
func (e *nilEmbedError) RawJSON() string { return `{}` }

// eventHolder has an Event field, as openai-go's ssestream.StreamError;
// nilEventEmbed embeds a nil pointer to it.
type eventHolder struct {
	Event struct {
		Type string
		Data []byte
	}
}

type nilEventEmbed struct{ *eventHolder }

func (e *nilEventEmbed) Error() string { return "wrapped" }

// TestLLMRetryableDoesNotPanicOnNilEmbeddedPointer is the bug where
// LLMRetryable, looking by reflection for the SDKs' stream errors, panics
// ("reflect: indirection through nil pointer to embedded struct") on an
// error whose struct embeds a nil pointer through which a StatusCode or
// Event field is promoted: reflect.Value.FieldByName cannot reach it.
func TestLLMRetryableDoesNotPanicOnNilEmbeddedPointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{name: "RawJSON and a nil embedded *http.Response", err: &nilEmbedError{}},
		{name: "a nil embedded struct with an Event field", err: &nilEventEmbed{}},
		{name: "wrapped", err: fmt.Errorf("call: %w", &nilEventEmbed{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("LLMRetryable(%v) panicked: %v", tt.err, r)
				}
			}()
			if retry.LLMRetryable(tt.err) {
				t.Errorf("LLMRetryable(%v) = true, want false: an error it does not know", tt.err)
			}
		})
	}
}

// An error event before output, on a stream the server keeps open: the
// retry follows at once, not after the attempt timeout that draining the
// open stream would wait out.
func TestTransportStreamErrorOnAnOpenStreamRetriesAtOnce(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	defer close(gate)
	srv := retrytest.NewServer(t,
		retrytest.Step{Func: gatedStream(sseAnthropicError("overloaded_error"), "", gate)},
		sseStep(sseAnthropicGood))
	tr, _, _ := sseTransport(t, retry.Policy{AttemptTimeout: time.Minute})
	tr.Policy.Clock = nil // the attempt timeout is real time
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readBody(resp)
	if err != nil || got != sseAnthropicGood {
		t.Errorf("body %q, %v; want the good stream", got, err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the retry took %v: the open stream was drained until the attempt timeout", took)
	}
}
