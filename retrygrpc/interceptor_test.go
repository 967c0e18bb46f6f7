package retrygrpc_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrygrpc"
	"github.com/retrykit/retry/retrytest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakePolicy returns a Policy on fake time: backoff delays of Base*2^(n-1)
// exactly, recorded by ft instead of waited.
func fakePolicy(ft *retrytest.FakeTime) retry.Policy {
	return retry.Policy{
		MaxAttempts: 4,
		Base:        100 * time.Millisecond,
		Clock:       ft.Clock,
		Sleep:       ft.Sleep,
		Rand:        ft.Rand,
	}
}

func withRetries(p retry.Policy) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(p)),
		grpc.WithDisableRetry(),
	}
}

func unavailable(msg string) reply { return reply{code: codes.Unavailable, msg: msg} }

func retryDelay(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

func quotaFailure() *errdetails.QuotaFailure {
	return &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{
		{Subject: "project:test", Description: "daily limit"},
	}}
}

// TestUnaryScripts plays one script per case against a real server and
// checks the calls made, the sleeps taken and the code returned.
func TestUnaryScripts(t *testing.T) {
	const hour = time.Hour
	ms := time.Millisecond
	tests := []struct {
		name      string
		script    []reply
		maxCalls  int // Policy.MaxAttempts; 0 means fakePolicy's 4
		wantCalls int
		wantCode  codes.Code
		wantSleep []time.Duration
		wantGave  retry.Reason // "" when the call does not end in *retry.Error
	}{
		{name: "unavailable twice then ok", script: []reply{unavailable("down"), unavailable("down")},
			wantCalls: 3, wantCode: codes.OK, wantSleep: []time.Duration{100 * ms, 200 * ms}},
		{name: "invalid argument is final", script: []reply{{code: codes.InvalidArgument, msg: "bad"}},
			wantCalls: 1, wantCode: codes.InvalidArgument},
		{name: "server deadline exceeded is final", script: []reply{{code: codes.DeadlineExceeded, msg: "downstream"}},
			wantCalls: 1, wantCode: codes.DeadlineExceeded},
		{name: "internal is final", script: []reply{{code: codes.Internal}}, wantCalls: 1, wantCode: codes.Internal},
		{name: "aborted is final", script: []reply{{code: codes.Aborted}}, wantCalls: 1, wantCode: codes.Aborted},
		{name: "give up after max attempts",
			script:    []reply{unavailable("a"), unavailable("b"), unavailable("c"), unavailable("d")},
			wantCalls: 4, wantCode: codes.Unavailable, wantGave: retry.ReasonMaxAttempts,
			wantSleep: []time.Duration{100 * ms, 200 * ms, 400 * ms}},
		{name: "pushback is a floor",
			script:    []reply{{code: codes.Unavailable, pushback: []string{"2500"}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{2500 * ms}},
		{name: "pushback shorter than backoff",
			script:    []reply{{code: codes.Unavailable, pushback: []string{"7"}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{100 * ms}},
		{name: "pushback zero", script: []reply{{code: codes.Unavailable, pushback: []string{"0"}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{100 * ms}},
		{name: "pushback -1 stops", script: []reply{{code: codes.Unavailable, pushback: []string{"-1"}}},
			wantCalls: 1, wantCode: codes.Unavailable},
		{name: "pushback malformed stops", script: []reply{{code: codes.Unavailable, pushback: []string{"1.5"}}},
			wantCalls: 1, wantCode: codes.Unavailable},
		{name: "pushback twice stops", script: []reply{{code: codes.Unavailable, pushback: []string{"1", "2"}}},
			wantCalls: 1, wantCode: codes.Unavailable},
		{name: "pushback on a final code changes nothing",
			script:    []reply{{code: codes.NotFound, pushback: []string{"5"}}},
			wantCalls: 1, wantCode: codes.NotFound},
		{name: "absurd pushback gives up at once",
			script:    []reply{{code: codes.Unavailable, pushback: []string{"99999999999999999999999999"}}},
			wantCalls: 1, wantCode: codes.Unavailable, wantGave: retry.ReasonDeadline},
		{name: "pushback past the deadline gives up at once",
			script:    []reply{{code: codes.Unavailable, pushback: []string{"3600000"}}},
			wantCalls: 1, wantCode: codes.Unavailable, wantGave: retry.ReasonDeadline},
		{name: "retry info honoured",
			script: []reply{{code: codes.Unavailable,
				details: []protoadapt.MessageV1{retryDelay(3 * time.Second)}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{3 * time.Second}},
		{name: "longer of retry info and pushback",
			script: []reply{{code: codes.Unavailable, pushback: []string{"4000"},
				details: []protoadapt.MessageV1{retryDelay(3 * time.Second)}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{4 * time.Second}},
		{name: "retry info past the deadline gives up at once",
			script: []reply{{code: codes.Unavailable,
				details: []protoadapt.MessageV1{retryDelay(hour)}}},
			wantCalls: 1, wantCode: codes.Unavailable, wantGave: retry.ReasonDeadline},
		{name: "absurd retry info gives up at once",
			script: []reply{{code: codes.Unavailable,
				details: []protoadapt.MessageV1{&errdetails.RetryInfo{
					RetryDelay: &durationpb.Duration{Seconds: 1 << 62, Nanos: 999_999_999}}}}},
			wantCalls: 1, wantCode: codes.Unavailable, wantGave: retry.ReasonDeadline},
		{name: "negative retry info is no hint",
			script: []reply{{code: codes.Unavailable,
				details: []protoadapt.MessageV1{&errdetails.RetryInfo{
					RetryDelay: &durationpb.Duration{Seconds: -5}}}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{100 * ms}},
		{name: "resource exhausted retried",
			script:    []reply{{code: codes.ResourceExhausted, msg: "busy"}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{100 * ms}},
		{name: "quota failure without retry info stops",
			script: []reply{{code: codes.ResourceExhausted,
				details: []protoadapt.MessageV1{quotaFailure()}}},
			wantCalls: 1, wantCode: codes.ResourceExhausted},
		{name: "quota failure with retry info waits",
			script: []reply{{code: codes.ResourceExhausted,
				details: []protoadapt.MessageV1{quotaFailure(), retryDelay(2 * time.Second)}}},
			wantCalls: 2, wantCode: codes.OK, wantSleep: []time.Duration{2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			p := fakePolicy(ft)
			p.MaxAttempts = max(tt.maxCalls, p.MaxAttempts)
			s, conn := startServer(t, steps(tt.script...), withRetries(p)...)
			got, err := say(testContext(t), conn, "hi")
			if c := s.Calls("hi"); c != tt.wantCalls {
				t.Errorf("server got %d calls, want %d", c, tt.wantCalls)
			}
			if c := status.Code(err); c != tt.wantCode {
				t.Errorf("status.Code(err) = %v, want %v (err: %v)", c, tt.wantCode, err)
			}
			if err == nil && got != "hi" {
				t.Errorf("reply %q, want %q", got, "hi")
			}
			if diff := cmp.Diff(tt.wantSleep, ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			checkShape(t, err, tt.wantGave, tt.wantCalls)
		})
	}
}

// checkShape checks what kind of error came back: a *retry.Error with
// reason and attempts when retrying gave up, else grpc's own status error,
// not wrapped.
func checkShape(t *testing.T, err error, reason retry.Reason, attempts int) {
	t.Helper()
	if err == nil {
		return
	}
	re, isRetryErr := err.(*retry.Error)
	if reason == "" {
		if isRetryErr {
			t.Errorf("err = %v, a *retry.Error; want the status error unchanged", err)
		}
		if _, ok := err.(interface{ GRPCStatus() *status.Status }); !ok {
			t.Errorf("err = %T, want grpc's status error itself", err)
		}
		return
	}
	if !isRetryErr {
		t.Fatalf("err = %T %v, want *retry.Error", err, err)
	}
	if re.Reason != reason || re.Attempts != attempts {
		t.Errorf("gave up with %s after %d attempts, want %s after %d", re.Reason, re.Attempts, reason, attempts)
	}
	if _, ok := re.Err.(interface{ GRPCStatus() *status.Status }); !ok {
		t.Errorf("retry.Error.Err = %T, want grpc's status error itself", re.Err)
	}
}

func TestGiveUpKeepsTheLastStatus(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.MaxAttempts = 3
	script := steps(unavailable("first"), reply{code: codes.ResourceExhausted, msg: "second"},
		reply{code: codes.ResourceExhausted, msg: "third"})
	_, conn := startServer(t, script, withRetries(p)...)
	_, err := say(testContext(t), conn, "x")
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Errorf("status.Code = %v, want ResourceExhausted", got)
	}
	re, ok := errors.AsType[*retry.Error](err)
	if !ok {
		t.Fatalf("err = %T %v, want *retry.Error", err, err)
	}
	if got := status.Convert(re.Err).Message(); got != "third" {
		t.Errorf("last status message %q, want %q", got, "third")
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		t.Errorf("status.FromError(err) = %v, %v; want ResourceExhausted, true", st, ok)
	}
}

// TestMetadataOfTheLastAttempt checks that grpc.Header and grpc.Trailer
// options see the last attempt's metadata, whether it succeeded or not.
func TestMetadataOfTheLastAttempt(t *testing.T) {
	md := func(v string) metadata.MD { return metadata.Pairs("attempt", v) }
	tests := []struct {
		name   string
		script []reply
		want   string
	}{
		{name: "success", want: "2", script: []reply{
			{code: codes.Unavailable, header: md("1"), trailer: md("1")},
			{header: md("2"), trailer: md("2")},
		}},
		{name: "give up", want: "2", script: []reply{
			{code: codes.Unavailable, header: md("1"), trailer: md("1")},
			{code: codes.Unavailable, header: md("2"), trailer: md("2")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := retrytest.NewFakeTime()
			p := fakePolicy(ft)
			p.MaxAttempts = 2
			s, conn := startServer(t, steps(tt.script...), withRetries(p)...)
			var h1, h2, tr metadata.MD
			h3 := grpc.HeaderCallOption{HeaderAddr: &metadata.MD{}}
			_, _ = say(testContext(t), conn, "m", grpc.Header(&h1), grpc.Header(&h2), grpc.Trailer(&tr),
				&h3, grpc.Header(nil), (*grpc.HeaderCallOption)(nil), (*grpc.TrailerCallOption)(nil))
			if c := s.Calls("m"); c != 2 {
				t.Fatalf("server got %d calls, want 2", c)
			}
			want := []string{tt.want}
			for name, got := range map[string]metadata.MD{"header": h1, "second header": h2,
				"pointer header": *h3.HeaderAddr, "trailer": tr} {
				if diff := cmp.Diff(want, got.Get("attempt")); diff != "" {
					t.Errorf("%s attempt (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestPushbackVisibleInTrailer(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.MaxAttempts = 1
	_, conn := startServer(t, steps(reply{code: codes.Unavailable, pushback: []string{"-1"}}), withRetries(p)...)
	var tr metadata.MD
	_, _ = say(testContext(t), conn, "t", grpc.Trailer(&tr))
	if diff := cmp.Diff([]string{"-1"}, tr.Get("grpc-retry-pushback-ms")); diff != "" {
		t.Errorf("pushback trailer (-want +got):\n%s", diff)
	}
}

func TestOnRetrySeesGRPCsError(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	var events []retry.Event
	p.OnRetry = func(e retry.Event) { events = append(events, e) }
	script := steps(reply{code: codes.Unavailable, msg: "down", pushback: []string{"1500"}}, unavailable("still"))
	_, conn := startServer(t, script, withRetries(p)...)
	if _, err := say(testContext(t), conn, "e"); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 {
		t.Fatalf("OnRetry called %d times, want 2", len(events))
	}
	type ev struct {
		Attempt        int
		Code           codes.Code
		Msg            string
		Delay          time.Duration
		FromRetryAfter bool
	}
	var got []ev
	for _, e := range events {
		if _, ok := e.Err.(interface{ GRPCStatus() *status.Status }); !ok {
			t.Errorf("Event.Err = %T, want grpc's status error itself", e.Err)
		}
		st := status.Convert(e.Err)
		got = append(got, ev{e.Attempt, st.Code(), st.Message(), e.Delay, e.FromRetryAfter})
	}
	want := []ev{
		{1, codes.Unavailable, "down", 1500 * time.Millisecond, true},
		{2, codes.Unavailable, "still", 200 * time.Millisecond, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestOwnRetryable(t *testing.T) {
	var mu sync.Mutex
	var judged []error
	judge := func(err error) bool {
		mu.Lock()
		judged = append(judged, err)
		mu.Unlock()
		return status.Code(err) == codes.Aborted || errors.Is(err, context.DeadlineExceeded)
	}
	tests := []struct {
		name      string
		script    []reply
		timeout   time.Duration
		wantCalls int
	}{
		{name: "aborted retried", script: []reply{{code: codes.Aborted}}, wantCalls: 2},
		{name: "unavailable final", script: []reply{unavailable("x")}, wantCalls: 1},
		{name: "server deadline final", script: []reply{{code: codes.DeadlineExceeded}}, wantCalls: 1},
		{name: "attempt timeout seen as such", script: []reply{{hang: true}},
			timeout: slowAttempt, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := retrytest.NewFakeTime()
			p := fakePolicy(ft)
			p.Retryable = judge
			p.AttemptTimeout = tt.timeout
			s, conn := startServer(t, steps(tt.script...), withRetries(p)...)
			if err := warmUp(testContext(t), conn); err != nil {
				t.Fatal(err)
			}
			_, _ = say(testContext(t), conn, "j")
			if c := s.Calls("j"); c != tt.wantCalls {
				t.Errorf("server got %d calls, want %d", c, tt.wantCalls)
			}
		})
	}
	// Whatever the judge saw still carries the status.
	for _, err := range judged {
		if status.Code(err) == codes.Unknown {
			t.Errorf("judge saw %v, without its status", err)
		}
	}
}

func TestInvalidPolicy(t *testing.T) {
	s, conn := startServer(t, steps(), withRetries(retry.Policy{MaxAttempts: -1})...)
	_, err := say(testContext(t), conn, "p")
	if !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("err = %v, want one wrapping retry.ErrInvalidPolicy", err)
	}
	if c := s.Calls("p"); c != 0 {
		t.Errorf("server got %d calls, want 0", c)
	}
}

// TestConcurrentCalls shares one interceptor among many goroutines, each
// with a script of its own; run it with -race.
func TestConcurrentCalls(t *testing.T) {
	ft := retrytest.NewFakeTime()
	s, conn := startServer(t, steps(unavailable("a"), unavailable("b")), withRetries(fakePolicy(ft))...)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			text := string(rune('a' + i))
			got, err := say(testContext(t), conn, text)
			if err == nil && got != text {
				err = errors.New("reply " + got + ", want " + text)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		text := string(rune('a' + i))
		if err != nil {
			t.Errorf("call %s: %v", text, err)
		}
		if c := s.Calls(text); c != 3 {
			t.Errorf("call %s: server got %d calls, want 3", text, c)
		}
	}
}

// TestAbsurdHintWithJitter checks that jitter added to a saturated hint
// neither overflows nor sleeps: the call gives up at once.
func TestAbsurdHintWithJitter(t *testing.T) {
	ft := retrytest.NewFakeTime()
	p := fakePolicy(ft)
	p.RetryAfterJitter = 0.5
	script := steps(reply{code: codes.Unavailable, pushback: []string{"9223372036854775807999"}})
	s, conn := startServer(t, script, withRetries(p)...)
	_, err := say(testContext(t), conn, "j")
	checkShape(t, err, retry.ReasonDeadline, 1)
	if c := s.Calls("j"); c != 1 {
		t.Errorf("server got %d calls, want 1", c)
	}
	if got := ft.Sleeps(); len(got) != 0 {
		t.Errorf("slept %v, want no sleep", got)
	}
}
