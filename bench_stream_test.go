package retry_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// streamHead is the start of an Anthropic Messages stream up to its first
// token, sent at once; streamTail the rest, sent after a flush.
var (
	streamHead = []byte("event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n")
	streamTail = []byte("event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n")
	eventStreamType = []string{"text/event-stream"}
)

// newStreamLoopback starts an HTTP/1.1 server on 127.0.0.1 that answers
// every request with a short event stream whose first token comes at once.
// The rest of the stream follows when the client sends on the channel it
// returns, as the next tokens of a real stream follow much later: a client
// that reads more than the first event must not find them already there.
func newStreamLoopback(b *testing.B) (*httptest.Server, chan<- struct{}) {
	next := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = eventStreamType
		_, _ = w.Write(streamHead)
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(streamTail)
	}))
	b.Cleanup(srv.Close)
	return srv, next
}

// BenchmarkStreamFirstByte is the time from sending a request to reading
// the first byte of its event stream, on loopback, through a Transport
// without a Stream (retry) and with one (commit, which holds the response
// back to the first token), in pairs as BenchmarkPairedLoopback makes
// them: every iteration makes one call of each, in turn first, each on its
// own tuned http.Transport. It reports both means and the commit point's
// extra time, in nanoseconds and in percent; ns/op is a pair's time.
func BenchmarkStreamFirstByte(b *testing.B) {
	srv, next := newStreamLoopback(b)
	plain := &http.Client{Transport: retry.NewTransport(tunedTransport(b), retry.Policy{})}
	commit := &http.Client{Transport: &retry.Transport{
		Base:   tunedTransport(b),
		Stream: &retry.Stream{Event: retry.LLMEvent},
	}}
	req := newGet(b, srv.URL+"/v1/messages")
	buf := make([]byte, 1)
	firstByte := func(c *http.Client) time.Duration {
		began := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			b.Fatal(err)
		}
		took := time.Since(began)
		next <- struct{}{}
		consume(b, resp, nil)
		return took
	}
	firstByte(plain) // the first connections are not the per-request cost
	firstByte(commit)
	var plainSum, commitSum time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			plainSum += firstByte(plain)
			commitSum += firstByte(commit)
		} else {
			commitSum += firstByte(commit)
			plainSum += firstByte(plain)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(plainSum)/float64(b.N), "retry-ns/ttfb")
	b.ReportMetric(float64(commitSum)/float64(b.N), "commit-ns/ttfb")
	b.ReportMetric(float64(commitSum-plainSum)/float64(b.N), "extra-ns/ttfb")
	b.ReportMetric(100*float64(commitSum-plainSum)/float64(plainSum), "overhead-%")
}

// TestStreamAddsNoAllocationElsewhere checks that a Stream on the Transport
// costs a response that is not an event stream nothing: the same
// allocations as without it.
func TestStreamAddsNoAllocationElsewhere(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(rt http.RoundTripper) float64 {
		return testing.AllocsPerRun(200, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		})
	}
	without := allocs(retry.NewTransport(&memRT{}, retry.Policy{}))
	with := allocs(&retry.Transport{Base: &memRT{}, Stream: &retry.Stream{Event: retry.LLMEvent}})
	if with != without {
		t.Errorf("a JSON response costs %v allocations with a Stream set, %v without", with, without)
	}
}
