// Command stream reads a streamed LLM answer (server-sent events, in the
// format of OpenAI's chat completions) whole inside one retry.Do attempt.
//
// A stream can break after half the answer has arrived, and a retry
// generates new text, not the rest of the old one. So an attempt is the
// whole stream: when it breaks, the partial answer is thrown away and the
// next attempt starts over, sending the POST again (harmless for text
// generation: it costs tokens, nothing more). There are two ways to show it:
//
//   - buffer, then show: the reader sees only a whole answer, late;
//   - show live, then on a break print a restart marker and start again.
//
// A stream can also stall: the connection stays open and nothing comes.
// retry.Transport's BodyIdleTimeout fails such a read, and the next attempt
// starts over; a long stream that keeps talking is never cut.
//
// It runs against a local fake that breaks and stalls on a script.
//
//	go run .
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("\nfailed:", err)
		os.Exit(1)
	}
}

func run() error {
	fake := startFake(os.Stdout)
	defer fake.Close()
	// The fake's pauses are short; a real API may think for a while before
	// the first token, so use tens of seconds there.
	client := &http.Client{Transport: newTransport(300 * time.Millisecond)}
	url := fake.URL + "/v1/chat/completions"
	policy := newPolicy()
	ctx := context.Background()

	fmt.Println("1. Buffer, then show. The stream breaks halfway; the reader never sees the half.")
	fake.play(breaks, whole)
	verbose := policy
	verbose.OnRetry = func(e retry.Event) {
		fmt.Printf(" (attempt %d failed: %v; starting over in %v)\n", e.Attempt, e.Err, e.Delay.Round(time.Millisecond))
	}
	answer, err := buffered(ctx, verbose, client, url, "Tell me about retries.")
	if err != nil {
		return err
	}
	fmt.Printf("answer: %s\n\n", answer)

	fmt.Println("2. Show live, then start again. The stream stalls; BodyIdleTimeout ends the wait.")
	fake.play(stalls, whole)
	fmt.Print("answer: ")
	if err := live(ctx, policy, client, url, "Tell me about retries.", os.Stdout); err != nil {
		return err
	}
	fmt.Println()
	return nil
}

// newPolicy returns the policy for a whole streamed answer.
func newPolicy() retry.Policy {
	return retry.Policy{
		MaxAttempts: 4,
		// One attempt reads the whole stream, so this bounds the longest
		// answer, not the wait for a byte: BodyIdleTimeout does that.
		AttemptTimeout: 5 * time.Minute,
		Deadline:       10 * time.Minute,
		Retryable:      retry.LLMRetryable,
	}
}

// newTransport returns the transport under the streaming client.
func newTransport(idle time.Duration) *retry.Transport {
	return &retry.Transport{
		// retry.Do around the whole stream does the retrying. One attempt
		// here, so that the two layers never multiply.
		Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: 30 * time.Second},
		// A stream silent this long has stalled: fail the read, and Do
		// starts over. A long stream that keeps talking is never cut.
		BodyIdleTimeout: idle,
	}
}

// buffered returns the whole answer, retrying a stream that breaks: the
// text of a broken attempt is thrown away with its buffer.
func buffered(ctx context.Context, p retry.Policy, c *http.Client, url, prompt string) (string, error) {
	return retry.Do(ctx, p, func(ctx context.Context) (string, error) {
		var b strings.Builder
		err := streamAnswer(ctx, c, url, prompt, &b)
		return b.String(), err
	})
}

// restartMarker is written after the partial text of a broken stream.
const restartMarker = " [interrupted; starting over]\n"

// live writes the answer to w as it arrives. When a stream breaks, it
// writes restartMarker and starts the answer again.
func live(ctx context.Context, p retry.Policy, c *http.Client, url, prompt string, w io.Writer) error {
	p.OnRetry = func(retry.Event) { _, _ = io.WriteString(w, restartMarker) }
	_, err := retry.Do(ctx, p, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, streamAnswer(ctx, c, url, prompt, w)
	})
	return err
}

// streamAnswer asks for a streamed chat completion and writes its text to w
// as it arrives. It returns nil only when the stream ended properly; a
// stream cut short is an error that retry.Do retries.
func streamAnswer(ctx context.Context, c *http.Client, url, prompt string, w io.Writer) error {
	body, err := json.Marshal(map[string]any{
		"model": "fake-model", "stream": true,
		"messages": []any{map[string]string{"role": "user", "content": prompt}},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A *retry.StatusError lets Do judge the status and honour the
		// server's Retry-After, as the Transport would.
		hint, _ := retry.ParseRetryAfter(resp.Header, time.Now())
		return &retry.StatusError{StatusCode: resp.StatusCode, Message: resp.Status, RetryAfter: hint}
	}
	return readEvents(resp.Body, w)
}

// readEvents copies the text of each event from r to w, until the event
// that ends the stream. An event counts once its closing blank line has
// arrived: a stream cut in the middle of one drops it, as the SSE standard
// says.
func readEvents(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var data []string // the data lines of the event being read
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
			continue // other fields and comments do not matter here
		}
		event := strings.Join(data, "\n")
		data = data[:0]
		switch event {
		case "":
			continue
		case "[DONE]":
			return nil
		}
		if err := writeDelta(w, event); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err // a reset, or a stall that BodyIdleTimeout ended: retried
	}
	return io.ErrUnexpectedEOF // the connection closed before [DONE]: retried
}

// writeDelta writes the text of one chat.completion.chunk event to w.
func writeDelta(w io.Writer, event string) error {
	var chunk struct {
		Choices []struct {
			Delta struct{ Content string }
		}
	}
	if err := json.Unmarshal([]byte(event), &chunk); err != nil {
		return fmt.Errorf("malformed event: %w", err) // not retried
	}
	for _, c := range chunk.Choices {
		if _, err := io.WriteString(w, c.Delta.Content); err != nil {
			return err
		}
	}
	return nil
}
