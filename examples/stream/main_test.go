package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// idle is the BodyIdleTimeout of the tests: short, yet far above the 30ms
// between the events of a steady stream, so that a loaded machine does not
// fail it.
const idle = 500 * time.Millisecond

var (
	fullText = strings.Join(answer, "")
	halfText = strings.Join(answer[:len(answer)/2], "")
)

// sse returns the events of words, and the end of the stream when done.
func sse(words []string, done bool) string {
	var b strings.Builder
	for _, w := range words {
		b.WriteString(chunkEvent(w))
	}
	if done {
		b.WriteString("data: [DONE]\n\n")
	}
	return b.String()
}

func sseHeader() http.Header { return http.Header{"Content-Type": {"text/event-stream"}} }

// Steps of the scripted server.
var (
	wholeStep = retrytest.Step{Header: sseHeader(), Body: sse(answer, true)}
	// brokenStep sends the first half of the events, then half of the
	// next one, and drops the connection.
	brokenStep = retrytest.Step{Header: sseHeader(), Body: sse(answer, true),
		ResetAfter: int64(len(sse(answer[:len(answer)/2], false)) + len(chunkEvent(answer[len(answer)/2]))/2)}
	stalledStep = retrytest.Step{Header: sseHeader(), Body: sse(answer[:3], false), Stall: true}
)

// steadyStep sends one event every 30ms: the whole stream (18 events,
// 540ms) takes longer than idle, no pause does.
var steadyStep = retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
	for k, v := range sseHeader() {
		w.Header()[k] = v
	}
	rc := http.NewResponseController(w)
	for _, word := range answer {
		_, _ = io.WriteString(w, chunkEvent(word))
		_ = rc.Flush()
		select {
		case <-time.After(30 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}}

// setup returns a scripted server, the example's client and its policy with
// fake time, so that retry.Do never waits.
func setup(t *testing.T, steps ...retrytest.Step) (*retrytest.Server, *http.Client, retry.Policy, *retrytest.FakeTime) {
	t.Helper()
	srv := retrytest.NewServer(t, steps...)
	ft := retrytest.NewFakeTime()
	p := newPolicy()
	p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
	return srv, &http.Client{Transport: newTransport(idle)}, p, ft
}

func TestBufferedDiscardsBrokenStream(t *testing.T) {
	t.Parallel()
	srv, client, p, ft := setup(t, brokenStep, wholeStep)
	got, err := buffered(t.Context(), p, client, srv.URL, "hello")
	if err != nil {
		t.Fatalf("buffered: %v", err)
	}
	if got != fullText {
		t.Errorf("answer = %q, want %q", got, fullText)
	}
	if n := srv.Requests(); n != 2 {
		t.Errorf("server received %d requests, want 2", n)
	}
	if diff := cmp.Diff([]time.Duration{500 * time.Millisecond}, ft.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
}

func TestLiveRestartsAfterBrokenStream(t *testing.T) {
	t.Parallel()
	srv, client, p, _ := setup(t, brokenStep, wholeStep)
	var out strings.Builder
	if err := live(t.Context(), p, client, srv.URL, "hello", &out); err != nil {
		t.Fatalf("live: %v", err)
	}
	// The half event cut by the reset is never shown.
	want := halfText + restartMarker + fullText
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestBodyIdleTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		step     retrytest.Step
		wantText string
		wantIdle bool
	}{
		{name: "stalled stream fails", step: stalledStep, wantText: strings.Join(answer[:3], ""), wantIdle: true},
		{name: "slow but steady stream completes", step: steadyStep, wantText: fullText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, client, _, _ := setup(t, tt.step)
			var out strings.Builder
			// Without a working idle timeout the stall would last until this.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := streamAnswer(ctx, client, srv.URL, "hello", &out)
			elapsed := time.Since(start)
			if got := out.String(); got != tt.wantText {
				t.Errorf("text = %q, want %q", got, tt.wantText)
			}
			if !tt.wantIdle {
				if err != nil {
					t.Fatalf("streamAnswer after %v: %v", elapsed, err)
				}
				if elapsed <= idle {
					t.Errorf("the stream took %v, not longer than the idle timeout %v: the test proves nothing", elapsed, idle)
				}
				return
			}
			var ne net.Error
			if !errors.Is(err, retry.ErrBodyIdle) || !errors.Is(err, context.DeadlineExceeded) ||
				!errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("streamAnswer error = %v (%T), want a timeout matching ErrBodyIdle and context.DeadlineExceeded", err, err)
			}
			if !retry.IsRetryable(err) {
				t.Errorf("IsRetryable(%v) = false, want true", err)
			}
			if elapsed < idle || elapsed > 5*time.Second {
				t.Errorf("the stalled stream failed after %v, want about %v", elapsed, idle)
			}
		})
	}
}

func TestStalledStreamStartsOver(t *testing.T) {
	t.Parallel()
	srv, client, p, _ := setup(t, stalledStep, wholeStep)
	got, err := buffered(t.Context(), p, client, srv.URL, "hello")
	if err != nil {
		t.Fatalf("buffered: %v", err)
	}
	if got != fullText {
		t.Errorf("answer = %q, want %q", got, fullText)
	}
	if n := srv.Requests(); n != 2 {
		t.Errorf("server received %d requests, want 2", n)
	}
}

func TestStatusBeforeTheStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		step         retrytest.Step
		wantStatus   int // of the error; 0: success
		wantRequests int
		wantSleeps   []time.Duration
	}{{
		name:         "429 is retried after its hint",
		step:         retrytest.Status(http.StatusTooManyRequests, "retry-after-ms", "1500"),
		wantRequests: 2, wantSleeps: []time.Duration{1500 * time.Millisecond},
	}, {
		name:       "400 is not retried",
		step:       retrytest.Status(http.StatusBadRequest),
		wantStatus: http.StatusBadRequest, wantRequests: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, client, p, ft := setup(t, tt.step, wholeStep)
			got, err := buffered(t.Context(), p, client, srv.URL, "hello")
			if tt.wantStatus == 0 {
				if err != nil || got != fullText {
					t.Errorf("buffered = %q, %v; want the whole answer", got, err)
				}
			} else if se, ok := errors.AsType[*retry.StatusError](err); !ok || se.StatusCode != tt.wantStatus {
				t.Errorf("buffered error = %v, want a *retry.StatusError with status %d", err, tt.wantStatus)
			}
			if n := srv.Requests(); n != tt.wantRequests {
				t.Errorf("server received %d requests, want %d", n, tt.wantRequests)
			}
			if diff := cmp.Diff(tt.wantSleeps, ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr error // matched with errors.Is; nil: success
	}{
		{name: "whole", in: sse(answer, true), want: fullText},
		{name: "ends before [DONE]", in: sse(answer[:2], false), want: strings.Join(answer[:2], ""),
			wantErr: io.ErrUnexpectedEOF},
		{name: "ends inside an event", in: sse(answer[:2], false) + `data: {"choi`,
			want: strings.Join(answer[:2], ""), wantErr: io.ErrUnexpectedEOF},
		{name: "comments, other fields and no space after the colon",
			in:   ": keep-alive\n\nevent: chunk\nid: 7\ndata:" + strings.TrimPrefix(chunkEvent("hi"), "data: ") + "data: [DONE]\n\n",
			want: "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			err := readEvents(strings.NewReader(tt.in), &out)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("readEvents error = %v, want %v", err, tt.wantErr)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("malformed event is not retried", func(t *testing.T) {
		t.Parallel()
		err := readEvents(strings.NewReader("data: {oops\n\n"), io.Discard)
		if err == nil || retry.IsRetryable(err) {
			t.Errorf("readEvents error = %v, want an error IsRetryable rejects", err)
		}
	})
}
