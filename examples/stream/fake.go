package main

// A local stand-in for a streaming LLM API, so that the example runs
// without a key: it streams a chat completion as server-sent events, and
// breaks or stalls when its script says so.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// mode is how the fake answers one request.
type mode int

const (
	whole  mode = iota // the whole answer
	breaks             // half the answer, then a dropped connection
	stalls             // a few words, then silence
)

// answer is what the fake model says, one event per word.
var answer = strings.SplitAfter("Retry what failed for a passing reason, wait longer each time, and stop before the caller gives up.", " ")

// fake is a scripted streaming server.
type fake struct {
	*httptest.Server
	out io.Writer

	mu     sync.Mutex // protects script
	script []mode
}

// startFake starts a fake on loopback that writes a line about each request
// to out. Close it when done.
func startFake(out io.Writer) *fake {
	f := &fake{out: out}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// play sets how the next requests are answered; after the script, whole.
func (f *fake) play(modes ...mode) {
	f.mu.Lock()
	f.script = modes
	f.mu.Unlock()
}

func (f *fake) next() mode {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.script) == 0 {
		return whole
	}
	m := f.script[0]
	f.script = f.script[1:]
	return m
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	m := f.next()
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	words := answer
	switch m {
	case breaks:
		words = answer[:len(answer)/2]
	case stalls:
		words = answer[:3]
	}
	for _, word := range words {
		_, _ = io.WriteString(w, chunkEvent(word))
		_ = rc.Flush()
		select {
		case <-time.After(40 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	switch m {
	case whole:
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	case breaks:
		fmt.Fprintf(f.out, "<server: dropped the connection after %d of %d words>", len(words), len(answer))
		dropConnection(rc)
	case stalls:
		fmt.Fprintf(f.out, "<server: silent after %d words>", len(words))
		<-r.Context().Done() // until the client gives up
	}
}

// chunkEvent is one server-sent event of a streamed chat completion.
func chunkEvent(text string) string {
	b, _ := json.Marshal(map[string]any{
		"object":  "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": text}}},
	})
	return "data: " + string(b) + "\n\n"
}

// dropConnection resets the connection under rc, as a failing network would.
func dropConnection(rc *http.ResponseController) {
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with a TCP reset, not a clean end
	}
	_ = conn.Close()
}
