package retryotel_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
)

// script returns a function for Do that fails with the given errors in
// turn, then succeeds.
func script(errs ...error) func(context.Context) (string, error) {
	n := 0
	return func(context.Context) (string, error) {
		if n < len(errs) {
			n++
			return "", errs[n-1]
		}
		return "ok", nil
	}
}

var unavailable = &retry.StatusError{StatusCode: 503}

func TestDo(t *testing.T) {
	tests := []struct {
		name       string
		policy     func(ft *retrytest.FakeTime) retry.Policy
		fn         func(context.Context) (string, error)
		wantErr    bool
		wantEvents []string
		wantPoints []string
	}{
		{
			name:   "success after two retries",
			policy: func(ft *retrytest.FakeTime) retry.Policy { return retry.Policy{Base: time.Second} },
			fn:     script(unavailable, unavailable),
			wantEvents: []string{
				"retry{error.type=503,retry.attempt=1,retry.delay=1,retry.from_retry_after=false}",
				"retry{error.type=503,retry.attempt=2,retry.delay=2,retry.from_retry_after=false}",
			},
			wantPoints: []string{
				"retry.client.call.retries{} count=1 sum=2",
				"retry.client.call.retry_delay{} count=1 sum=3",
			},
		},
		{
			name:   "server's Retry-After sets the delay",
			policy: func(ft *retrytest.FakeTime) retry.Policy { return retry.Policy{Base: time.Second} },
			fn:     script(&retry.StatusError{StatusCode: 429, RetryAfter: 5 * time.Second}),
			wantEvents: []string{
				"retry{error.type=429,retry.attempt=1,retry.delay=5,retry.from_retry_after=true}",
			},
			wantPoints: []string{
				"retry.client.call.retries{} count=1 sum=1",
				"retry.client.call.retry_delay{} count=1 sum=5",
			},
		},
		{
			name: "give up on deadline",
			policy: func(ft *retrytest.FakeTime) retry.Policy {
				return retry.Policy{Base: time.Second, Deadline: 2 * time.Second}
			},
			fn:      script(unavailable, unavailable, unavailable),
			wantErr: true,
			wantEvents: []string{
				"retry{error.type=503,retry.attempt=1,retry.delay=1,retry.from_retry_after=false}",
				"retry.give_up{error.type=503,retry.attempts=2,retry.reason=deadline}",
			},
			wantPoints: []string{
				"retry.client.call.give_ups{error.type=503,retry.reason=deadline} value=1",
				"retry.client.call.retries{error.type=503} count=1 sum=1",
				"retry.client.call.retry_delay{error.type=503} count=1 sum=1",
			},
		},
		{
			name:    "give up on max attempts",
			policy:  func(ft *retrytest.FakeTime) retry.Policy { return retry.Policy{Base: time.Second, MaxAttempts: 2} },
			fn:      script(unavailable, errors.New("connection reset by peer: made up, but retryable here")),
			wantErr: true,
			wantEvents: []string{
				"retry{error.type=503,retry.attempt=1,retry.delay=1,retry.from_retry_after=false}",
				"retry.give_up{error.type=*errors.errorString,retry.attempts=2,retry.reason=max_attempts}",
			},
			wantPoints: []string{
				"retry.client.call.give_ups{error.type=*errors.errorString,retry.reason=max_attempts} value=1",
				"retry.client.call.retries{error.type=*errors.errorString} count=1 sum=1",
				"retry.client.call.retry_delay{error.type=*errors.errorString} count=1 sum=1",
			},
		},
		{
			name: "budget refuses the first retry",
			policy: func(ft *retrytest.FakeTime) retry.Policy {
				return retry.Policy{Budget: &retry.Budget{Ratio: 1e-6, MinPerSecond: 1e-6, Clock: ft.Clock}}
			},
			fn:         script(unavailable, unavailable),
			wantErr:    true,
			wantEvents: []string{"retry.give_up{error.type=503,retry.attempts=1,retry.reason=budget}"},
			wantPoints: []string{
				"retry.client.call.budget_refusals{error.type=503} value=1",
				"retry.client.call.give_ups{error.type=503,retry.reason=budget} value=1",
				"retry.client.call.retries{error.type=503} count=1 sum=0",
				"retry.client.call.retry_delay{error.type=503} count=1 sum=0",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tel := newTelemetry(t)
			ft := retrytest.NewFakeTime()
			p := tt.policy(ft)
			p.Clock, p.Sleep, p.Rand = ft.Clock, ft.Sleep, ft.Rand
			p.Retryable = func(error) bool { return true }
			p = retryotel.Instrument(p, tel.config())
			ctx, caller := tel.tp.Tracer("test").Start(context.Background(), "caller")

			_, err := retry.Do(ctx, p, tt.fn)
			caller.End()

			if (err != nil) != tt.wantErr {
				t.Fatalf("Do error = %v, want error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantEvents, events(caller.(sdktrace.ReadOnlySpan))); diff != "" {
				t.Errorf("caller's span events (-want +got):\n%s", diff)
			}
			tel.checkPoints(t, tt.wantPoints)
		})
	}
}

func TestDoCanceledCall(t *testing.T) {
	tel := newTelemetry(t)
	ctx, cancel := context.WithCancel(context.Background())
	p := retryotel.Instrument(retry.Policy{}, tel.config())
	_, err := retry.Do(ctx, p, func(context.Context) (int, error) {
		cancel()
		return 0, unavailable
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Do error = %v, want context.Canceled", err)
	}
	want := []string{
		"retry.client.call.retries{error.type=canceled} count=1 sum=0",
		"retry.client.call.retry_delay{error.type=canceled} count=1 sum=0",
	}
	tel.checkPoints(t, want)
}

func TestPacerWaitRecordedOnlyWhenWaited(t *testing.T) {
	tel := newTelemetry(t)
	p := retryotel.Instrument(retry.Policy{}, tel.config())
	ctx := context.Background()
	p.OnDone(retry.Outcome{Attempts: 1, Context: ctx})
	p.OnDone(retry.Outcome{Attempts: 1, Waited: 1500 * time.Millisecond, Context: ctx})
	p.OnDone(retry.Outcome{Attempts: 1, Waited: 500 * time.Millisecond}) // no context: Background
	want := []string{
		"retry.client.call.pacer_wait{} count=2 sum=2",
		"retry.client.call.retries{} count=3 sum=0",
		"retry.client.call.retry_delay{} count=3 sum=0",
	}
	tel.checkPoints(t, want)
}

func TestNoCallerSpanNoEvents(t *testing.T) {
	tel := newTelemetry(t)
	ft := retrytest.NewFakeTime()
	p := retryotel.Instrument(retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}, tel.config())
	if _, err := retry.Do(context.Background(), p, script(unavailable)); err != nil {
		t.Fatal(err)
	}
	if n := len(tel.spans.Ended()); n != 0 {
		t.Errorf("%d spans recorded without a caller's span or otelhttp, want 0", n)
	}
	if got := tel.points(t); len(got) != 2 {
		t.Errorf("metrics %q, want the retries and retry_delay points", got)
	}
}

// TestGlobalProviderByDefault runs alone (no t.Parallel): it installs a
// global MeterProvider. (That the global provider delegates to one
// installed later is otel's own promise, kept once per process.)
func TestGlobalProviderByDefault(t *testing.T) {
	tel := newTelemetry(t)
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(tel.mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev) })
	ft := retrytest.NewFakeTime()
	p := retryotel.Instrument(retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Base: time.Second}, retryotel.Config{})

	if _, err := retry.Do(context.Background(), p, script(unavailable)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"retry.client.call.retries{} count=1 sum=1",
		"retry.client.call.retry_delay{} count=1 sum=1",
	}
	tel.checkPoints(t, want)
}

func TestConcurrentCalls(t *testing.T) {
	tel := newTelemetry(t)
	p := retryotel.Instrument(retry.Policy{Base: time.Second}, tel.config())
	const calls = 50
	errs := make(chan error, calls)
	for range calls {
		go func() {
			// A fake clock each: a shared one would count the sleeps of
			// other calls in each call's Outcome.Slept.
			ft := retrytest.NewFakeTime()
			q := p
			q.Clock, q.Sleep, q.Rand = ft.Clock, ft.Sleep, ft.Rand
			ctx, span := tel.tp.Tracer("test").Start(context.Background(), "caller")
			defer span.End()
			_, err := retry.Do(ctx, q, script(unavailable))
			errs <- err
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"retry.client.call.retries{} count=50 sum=50",
		"retry.client.call.retry_delay{} count=50 sum=50",
	}
	tel.checkPoints(t, want)
}

func TestOddRequests(t *testing.T) {
	tests := []struct {
		name string
		req  *http.Request
		want string
	}{
		{name: "no URL", req: &http.Request{Method: "GET"}, want: "{http.request.method=GET}"},
		{name: "no host", req: &http.Request{Method: "PUT", URL: &url.URL{Path: "/x"}}, want: "{http.request.method=PUT}"},
		{name: "IPv6 with port", req: &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "[::1]:8080"}}, want: "{http.request.method=GET,server.address=::1}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tel := newTelemetry(t)
			p := retryotel.Instrument(retry.Policy{}, tel.config())
			p.OnDone(retry.Outcome{Attempts: 1, Request: tt.req, Context: context.Background()})
			want := []string{
				"retry.client.call.retries" + tt.want + " count=1 sum=0",
				"retry.client.call.retry_delay" + tt.want + " count=1 sum=0",
			}
			tel.checkPoints(t, want)
		})
	}
}

func TestHedgesCountedApart(t *testing.T) {
	tel := newTelemetry(t)
	p := retryotel.Instrument(retry.Policy{}, tel.config())
	p.OnDone(retry.Outcome{Attempts: 3, Hedges: 2, Context: context.Background()})
	p.OnDone(retry.Outcome{Attempts: 2, Context: context.Background()})
	want := []string{
		"retry.client.call.hedges{} value=2",
		"retry.client.call.retries{} count=2 sum=1",
		"retry.client.call.retry_delay{} count=2 sum=0",
	}
	tel.checkPoints(t, want)
}
