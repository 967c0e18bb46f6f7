package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
)

// call makes one GET through an instrumented Transport under a caller's
// span, and returns the response's status and the caller's span.
func call(t *testing.T, tel *telemetry, srv *retrytest.Server, p retry.Policy) (int, sdktrace.ReadOnlySpan) {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	client := &http.Client{Transport: retryotel.NewTransport(base, p, tel.config())}
	ctx, caller := tel.tp.Tracer("test").Start(context.Background(), "caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/things/42?key=secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	caller.End()
	return resp.StatusCode, caller.(sdktrace.ReadOnlySpan)
}

// resendCount returns the span's http.request.resend_count, or "absent".
func resendCount(s sdktrace.ReadOnlySpan) string {
	for _, a := range s.Attributes() {
		if a.Key == "http.request.resend_count" {
			return a.Value.String()
		}
	}
	return "absent"
}

// events renders a span's events as "name{k=v,...}".
func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name+attrs(attribute.NewSet(e.Attributes...)))
	}
	return out
}

// attemptSpans returns the recorded CLIENT spans, in the order they ended.
func attemptSpans(tel *telemetry) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

func TestTransportSpanPerAttemptAndMetrics(t *testing.T) {
	tel := newTelemetry(t)
	srv := retrytest.NewServer(t, retrytest.Status(503), retrytest.Status(503), retrytest.Status(200))
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Base: 100 * time.Millisecond}

	status, caller := call(t, tel, srv, p)
	if testing.Verbose() {
		defer tel.logTelemetry(t)
	}

	if status != http.StatusOK {
		t.Fatalf("status = %d, want 200", status)
	}
	spans := attemptSpans(tel)
	if len(spans) != 3 {
		t.Fatalf("%d CLIENT spans, want 3 (one per attempt)", len(spans))
	}
	received := srv.Received()
	if len(received) != 3 {
		t.Fatalf("server received %d requests, want 3", len(received))
	}
	var gotCounts, gotParents []string
	seen := map[string]bool{}
	for i, s := range spans {
		gotCounts = append(gotCounts, resendCount(s))
		if s.Parent().SpanID() != caller.SpanContext().SpanID() {
			t.Errorf("attempt %d: parent span %v, want the caller's %v", i+1, s.Parent().SpanID(), caller.SpanContext().SpanID())
		}
		tp := received[i].Header.Get("traceparent")
		want := fmt.Sprintf("00-%s-%s-01", s.SpanContext().TraceID(), s.SpanContext().SpanID())
		if tp != want {
			t.Errorf("attempt %d: server saw traceparent %q, want the attempt's span %q", i+1, tp, want)
		}
		seen[tp] = true
		gotParents = append(gotParents, tp)
	}
	if len(seen) != 3 {
		t.Errorf("traceparents %q: want 3 distinct", gotParents)
	}
	if diff := cmp.Diff([]string{"absent", "1", "2"}, gotCounts); diff != "" {
		t.Errorf("resend counts (-want +got):\n%s", diff)
	}
	wantEvents := []string{
		"retry{error.type=503,retry.attempt=1,retry.delay=0.1,retry.from_retry_after=false}",
		"retry{error.type=503,retry.attempt=2,retry.delay=0.2,retry.from_retry_after=false}",
	}
	if diff := cmp.Diff(wantEvents, events(caller)); diff != "" {
		t.Errorf("caller's span events (-want +got):\n%s", diff)
	}
	if got, want := ft.Slept(), 300*time.Millisecond; got != want {
		t.Fatalf("fake sleeps total %v, want %v", got, want)
	}
	wantPoints := []string{
		"retry.client.call.retries{http.request.method=GET,server.address=127.0.0.1} count=1 sum=2",
		"retry.client.call.retry_delay{http.request.method=GET,server.address=127.0.0.1} count=1 sum=0.3",
	}
	tel.checkPoints(t, wantPoints)
}

func TestTransportGiveUpOnDeadline(t *testing.T) {
	tel := newTelemetry(t)
	srv := retrytest.NewServer(t, retrytest.Status(503), retrytest.Status(503), retrytest.Status(200))
	ft := retrytest.NewFakeTime()
	// The backoff after attempt 2 (2s) would cross the 1.5s deadline.
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Base: time.Second, Deadline: 1500 * time.Millisecond}

	status, caller := call(t, tel, srv, p)
	if testing.Verbose() {
		defer tel.logTelemetry(t)
	}

	if status != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want the last response's 503", status)
	}
	if n := len(attemptSpans(tel)); n != 2 {
		t.Errorf("%d CLIENT spans, want 2", n)
	}
	wantEvents := []string{
		"retry{error.type=503,retry.attempt=1,retry.delay=1,retry.from_retry_after=false}",
		"retry.give_up{error.type=503,retry.attempts=2,retry.reason=deadline}",
	}
	if diff := cmp.Diff(wantEvents, events(caller)); diff != "" {
		t.Errorf("caller's span events (-want +got):\n%s", diff)
	}
	wantPoints := []string{
		"retry.client.call.give_ups{error.type=503,http.request.method=GET,retry.reason=deadline,server.address=127.0.0.1} value=1",
		"retry.client.call.retries{error.type=503,http.request.method=GET,server.address=127.0.0.1} count=1 sum=1",
		"retry.client.call.retry_delay{error.type=503,http.request.method=GET,server.address=127.0.0.1} count=1 sum=1",
	}
	tel.checkPoints(t, wantPoints)
}

func TestUserHooksCalledOnceNothingRecordedTwice(t *testing.T) {
	tel := newTelemetry(t)
	srv := retrytest.NewServer(t, retrytest.Status(503), retrytest.Status(503), retrytest.Status(200))
	ft := retrytest.NewFakeTime()
	var retries []int
	var outcomes []int
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Base: 100 * time.Millisecond,
		OnRetry: func(ev retry.Event) { retries = append(retries, ev.Attempt) },
		OnDone:  func(o retry.Outcome) { outcomes = append(outcomes, o.Attempts) },
	}

	_, caller := call(t, tel, srv, p)

	if diff := cmp.Diff([]int{1, 2}, retries); diff != "" {
		t.Errorf("user's OnRetry saw attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3}, outcomes); diff != "" {
		t.Errorf("user's OnDone saw attempts (-want +got):\n%s", diff)
	}
	if n := len(events(caller)); n != 2 {
		t.Errorf("caller's span has %d events, want 2: %q", n, events(caller))
	}
	wantPoints := []string{
		"retry.client.call.retries{http.request.method=GET,server.address=127.0.0.1} count=1 sum=2",
		"retry.client.call.retry_delay{http.request.method=GET,server.address=127.0.0.1} count=1 sum=0.3",
	}
	tel.checkPoints(t, wantPoints)
}

func TestResendCountOutsideARetryCall(t *testing.T) {
	tel := newTelemetry(t)
	ctx, span := tel.tp.Tracer("test").Start(context.Background(), "plain", trace.WithSpanKind(trace.SpanKindClient))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.invalid/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := retryotel.ResendCount(ok).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	span.End()
	if got := resendCount(span.(sdktrace.ReadOnlySpan)); got != "absent" {
		t.Errorf("resend count %s on a request sent outside a retry call, want absent", got)
	}
}

func TestNewTransportMethodAttribute(t *testing.T) {
	tests := []struct {
		name, method, want string
	}{
		{name: "known", method: http.MethodDelete, want: "DELETE"},
		{name: "made up", method: "BREW", want: "_OTHER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel := newTelemetry(t)
			ft := retrytest.NewFakeTime()
			rt := retry.NewTransport(ok, retryotel.Instrument(retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep}, tel.config()))
			req, err := http.NewRequest(tt.method, "https://api.example.com:8443/v1/users/123", strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			want := []string{
				"retry.client.call.retries{http.request.method=" + tt.want + ",server.address=api.example.com} count=1 sum=0",
				"retry.client.call.retry_delay{http.request.method=" + tt.want + ",server.address=api.example.com} count=1 sum=0",
			}
			tel.checkPoints(t, want)
		})
	}
}

// TestRecipeKeepsDialErrorsRetryable: a POST that never reached the server
// is retried by retry.Transport; otelhttp between them must not hide the
// dial error that proves it.
func TestRecipeKeepsDialErrorsRetryable(t *testing.T) {
	tel := newTelemetry(t)
	srv := retrytest.NewServer(t)
	addr := srv.URL
	srv.Close() // nothing listens there any more: every dial is refused
	ft := retrytest.NewFakeTime()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	rt := retryotel.NewTransport(base, retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, MaxAttempts: 3}, tel.config())
	req, err := http.NewRequest(http.MethodPost, addr+"/v1/chat", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.RoundTrip(req)
	var rerr *retry.Error
	if !errors.As(err, &rerr) || rerr.Reason != retry.ReasonMaxAttempts || rerr.Attempts != 3 {
		t.Fatalf("RoundTrip error = %v, want a *retry.Error after 3 attempts (max_attempts)", err)
	}
	var counts []string
	for _, s := range attemptSpans(tel) {
		counts = append(counts, resendCount(s))
	}
	if diff := cmp.Diff([]string{"absent", "1", "2"}, counts); diff != "" {
		t.Errorf("resend counts (-want +got):\n%s", diff)
	}
	want := []string{
		"retry.client.call.give_ups{error.type=*net.OpError,http.request.method=POST,retry.reason=max_attempts,server.address=127.0.0.1} value=1",
		"retry.client.call.retries{error.type=*net.OpError,http.request.method=POST,server.address=127.0.0.1} count=1 sum=2",
		"retry.client.call.retry_delay{error.type=*net.OpError,http.request.method=POST,server.address=127.0.0.1} count=1 sum=1.5",
	}
	tel.checkPoints(t, want)
}

// TestTransportHedgeSpansAndMetrics: a hedge has a CLIENT span of its own,
// marked as a resend, a "retry.hedge" event on the caller's span, and is
// counted as a hedge, not a retry.
func TestTransportHedgeSpansAndMetrics(t *testing.T) {
	tel := newTelemetry(t)
	// The first attempt is slow; the hedge answers.
	srv := retrytest.NewServer(t, retrytest.Step{Delay: 5 * time.Second}, retrytest.Status(200))
	p := retry.Policy{Hedge: retry.Hedge{Max: 1, Delay: 20 * time.Millisecond}}
	status, caller := call(t, tel, srv, p)
	if status != http.StatusOK {
		t.Fatalf("status = %d, want 200", status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(attemptSpans(tel)) < 2 && time.Now().Before(deadline) { // the loser's span ends when it is cancelled
		time.Sleep(time.Millisecond)
	}
	var counts []string
	for _, s := range attemptSpans(tel) {
		counts = append(counts, resendCount(s))
	}
	slices.Sort(counts)
	if diff := cmp.Diff([]string{"1", "absent"}, counts); diff != "" {
		t.Errorf("resend counts of the attempt spans (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"retry.hedge{retry.attempt=2,retry.delay=0.02}"}, events(caller)); diff != "" {
		t.Errorf("caller's span events (-want +got):\n%s", diff)
	}
	tel.checkPoints(t, []string{
		"retry.client.call.hedges{http.request.method=GET,server.address=127.0.0.1} value=1",
		"retry.client.call.retries{http.request.method=GET,server.address=127.0.0.1} count=1 sum=0",
		"retry.client.call.retry_delay{http.request.method=GET,server.address=127.0.0.1} count=1 sum=0",
	})
}
