package main

// The streamed answer of scenario 5: an Anthropic message stream, event by
// event.

import (
	"encoding/json"
	"time"
)

// tokenGap is the pause between the events of a stream.
const tokenGap = 25 * time.Millisecond

// messageStart is the first event of an Anthropic message stream.
var messageStart = event("message_start",
	`{"type":"message_start","message":{"id":"msg_demo","type":"message","role":"assistant","content":[]}}`)

// event returns one server-sent event.
func event(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// streamedText returns the events of a whole message stream whose text is
// tokens.
func streamedText(tokens ...string) []string {
	evs := []string{messageStart, event("content_block_start",
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)}
	for _, tok := range tokens {
		q, _ := json.Marshal(tok)
		evs = append(evs, event("content_block_delta",
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(q)+`}}`))
	}
	return append(evs,
		event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`),
		event("message_stop", `{"type":"message_stop"}`))
}
