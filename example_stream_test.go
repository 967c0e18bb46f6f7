package retry_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/retrykit/retry"
)

// An LLM API may answer 200 and then report, as the stream's first event,
// that it is overloaded. With a Stream, the Transport reads the stream
// ahead to its first output, retries such a failure unseen, and hands over
// the stream that succeeds.
func ExampleTransport_stream() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\n"+
			`data: {"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[]}}`+"\n\n")
		if requests.Add(1) == 1 {
			fmt.Fprint(w, "event: error\n"+
				`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`+"\n\n")
			return
		}
		for _, text := range []string{"Hello", ", world"} {
			fmt.Fprintf(w, "event: content_block_delta\n"+
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`+"\n\n", text)
		}
		fmt.Fprint(w, "event: message_stop\n"+`data: {"type":"message_stop"}`+"\n\n")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &retry.Transport{
		Policy: retry.Policy{Base: 1, Cap: 1}, // in real code: retry.Policy{}
		// Text generation may run twice: a POST is sent again after a 529.
		Replayable: func(*http.Request) bool { return true },
		Stream:     &retry.Stream{Event: retry.LLMEvent},
	}}
	resp, err := client.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()

	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev struct {
			Delta struct{ Text string } `json:"delta"`
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
			text.WriteString(ev.Delta.Text)
		}
	}
	if err := sc.Err(); err != nil { // a *retry.StreamError, or a cut stream
		fmt.Println(err)
		return
	}
	fmt.Println("requests:", requests.Load())
	fmt.Println("text:", text.String())
	// Output:
	// requests: 2
	// text: Hello, world
}
