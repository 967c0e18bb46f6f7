package retry_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// timeoutError is a net.Error that timed out, as a dialer or a connection
// deadline reports it.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// urlErr wraps err the way net/http.Client does.
func urlErr(err error) error {
	return &url.Error{Op: "Post", URL: "https://api.example.com/v1/chat", Err: err}
}

// opErr wraps err the way package net does for operation op.
func opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Err: err}
}

// shouldRetry returns a StatusError whose response carries x-should-retry: v.
func shouldRetry(code int, v string) *retry.StatusError {
	return &retry.StatusError{StatusCode: code, Response: &http.Response{
		StatusCode: code,
		Header:     http.Header{"X-Should-Retry": {v}},
	}}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	reset := opErr("read", os.NewSyscallError("read", syscall.ECONNRESET))
	certErr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	notFound := &net.DNSError{Err: "no such host", Name: "api.invalid", IsNotFound: true}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "attempt timeout", err: context.DeadlineExceeded, want: true},
		{name: "attempt timeout wrapped", err: urlErr(fmt.Errorf("read: %w", context.DeadlineExceeded)), want: true},
		{name: "reset", err: syscall.ECONNRESET, want: true},
		{name: "reset in OpError", err: reset, want: true},
		{name: "reset in url.Error", err: urlErr(reset), want: true},
		{name: "refused", err: syscall.ECONNREFUSED, want: true},
		{name: "refused on dial", err: urlErr(opErr("dial", os.NewSyscallError("connect", syscall.ECONNREFUSED))), want: true},
		{name: "aborted", err: opErr("read", syscall.ECONNABORTED), want: true},
		{name: "broken pipe", err: urlErr(opErr("write", os.NewSyscallError("write", syscall.EPIPE))), want: true},
		{name: "unexpected EOF", err: io.ErrUnexpectedEOF, want: true},
		{name: "unexpected EOF in url.Error", err: urlErr(io.ErrUnexpectedEOF), want: true},
		{name: "EOF on a reused connection", err: urlErr(io.EOF), want: true},
		{name: "net.Error timeout", err: timeoutError{}, want: true},
		{name: "read deadline", err: urlErr(opErr("read", os.ErrDeadlineExceeded)), want: true},
		{name: "failed dial", err: opErr("dial", errors.New("network is unreachable")), want: true},
		{name: "temporary DNS failure", err: opErr("dial", &net.DNSError{Err: "server misbehaving", IsTemporary: true}), want: true},
		{name: "408", err: statusErr(408), want: true},
		{name: "429", err: statusErr(429), want: true},
		{name: "500", err: statusErr(500), want: true},
		{name: "502", err: statusErr(502), want: true},
		{name: "503", err: statusErr(503), want: true},
		{name: "504", err: statusErr(504), want: true},
		{name: "529 overloaded", err: statusErr(529), want: true},
		{name: "wrapped 503", err: fmt.Errorf("calling the API: %w", statusErr(503)), want: true},
		{name: "400", err: statusErr(400)},
		{name: "401", err: statusErr(401)},
		{name: "403", err: statusErr(403)},
		{name: "404", err: statusErr(404)},
		{name: "409", err: statusErr(409)},
		{name: "422", err: statusErr(422)},
		{name: "501", err: statusErr(501)},
		{name: "505", err: statusErr(505)},
		{name: "x-should-retry true on a 400", err: shouldRetry(400, "true"), want: true},
		{name: "x-should-retry true on a 501", err: shouldRetry(501, "true"), want: true},
		{name: "x-should-retry false on a 503", err: shouldRetry(503, "false")},
		{name: "x-should-retry false on a 429", err: shouldRetry(429, "false")},
		{name: "x-should-retry other value on a 503", err: shouldRetry(503, "maybe"), want: true},
		{name: "x-should-retry other value on a 400", err: shouldRetry(400, "maybe")},
		{name: "nil", err: nil},
		{name: "unknown", err: errors.New("something odd")},
		{name: "canceled", err: context.Canceled},
		{name: "canceled in url.Error", err: urlErr(context.Canceled)},
		{name: "certificate", err: certErr},
		{name: "certificate in url.Error", err: urlErr(certErr)},
		{name: "certificate on dial", err: opErr("dial", certErr)},
		{name: "unknown authority on dial", err: opErr("dial", x509.UnknownAuthorityError{})},
		{name: "hostname mismatch", err: urlErr(x509.HostnameError{Host: "api.example.com"})},
		{name: "expired certificate", err: opErr("dial", x509.CertificateInvalidError{Reason: x509.Expired})},
		{name: "host not found", err: notFound},
		{name: "host not found on dial", err: urlErr(opErr("dial", notFound))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retry.IsRetryable(tt.err); got != tt.want {
				t.Errorf("IsRetryable(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestDoReturnsNonRetryableErrorUnchanged(t *testing.T) {
	t.Parallel()
	bad := statusErr(400)
	tests := []struct {
		name       string
		p          retry.Policy
		errs       []error
		wantCalls  int
		wantSleeps []time.Duration
	}{
		{name: "400 at once", errs: []error{bad}, wantCalls: 1},
		{
			name: "400 after a 503", errs: []error{statusErr(503), bad},
			wantCalls: 2, wantSleeps: []time.Duration{500 * time.Millisecond},
		},
		{
			name: "Retryable rejects a 503",
			p:    retry.Policy{Retryable: func(error) bool { return false }},
			errs: []error{bad}, wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			s := &loopScript{errs: tt.errs}
			_, err := retry.Do(t.Context(), withFakeTime(tt.p, ft), s.fn)
			if err != bad { // the very same value, not a copy
				t.Errorf("err = %v (%T), want the attempt's own *StatusError %p", err, err, bad)
			}
			checkCalls(t, s, tt.wantCalls)
			checkSleeps(t, ft, tt.wantSleeps...)
		})
	}
}

func TestDoCustomRetryable(t *testing.T) {
	t.Parallel()
	ft := retrytest.NewFakeTime()
	odd := errors.New("odd but transient")
	var seen []error
	p := withFakeTime(retry.Policy{Retryable: func(err error) bool {
		seen = append(seen, err)
		return err == odd
	}}, ft)
	s := &loopScript{errs: []error{odd, odd}}
	if got, err := retry.Do(t.Context(), p, s.fn); err != nil || got != "ok" {
		t.Fatalf("Do = (%q, %v), want (\"ok\", nil)", got, err)
	}
	checkCalls(t, s, 3)
	if want := []error{odd, odd}; !slices.Equal(seen, want) {
		t.Errorf("Retryable saw %v, want %v", seen, want)
	}
}

// secretResponse carries what an error message must never show.
func secretResponse(code int) *http.Response {
	return &http.Response{
		StatusCode: code,
		Header: http.Header{
			"Authorization": {"Bearer sk-secret-header"},
			"Retry-After":   {"7"},
		},
		Body: io.NopCloser(strings.NewReader(`{"error":"secret-body"}`)),
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	se503 := &retry.StatusError{StatusCode: 503, RetryAfter: 7 * time.Second, Response: secretResponse(503)}
	tests := []struct {
		name string
		err  error
		want []string // parts the message must contain
	}{
		{name: "status", err: se503, want: []string{"503", "Service Unavailable"}},
		{
			name: "status with message",
			err:  &retry.StatusError{StatusCode: 529, Message: "529 Overloaded", Response: secretResponse(529)},
			want: []string{"529 Overloaded"},
		},
		{name: "unknown status", err: &retry.StatusError{StatusCode: 799}, want: []string{"799"}},
		{
			name: "gave up",
			err:  &retry.Error{Reason: retry.ReasonMaxAttempts, Attempts: 3, Err: se503},
			want: []string{"3 attempts", "max_attempts", "503"},
		},
		{
			name: "gave up without an error",
			err:  &retry.Error{Reason: retry.ReasonDeadline, Attempts: 1},
			want: []string{"1 attempt", "deadline"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg := tt.err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Error() = %q, want it to contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "secret") {
				t.Errorf("Error() = %q shows a header or a body", msg)
			}
		})
	}
}

func TestReasonValues(t *testing.T) {
	t.Parallel()
	// Reasons end up in logs and metrics labels: their text is part of the contract.
	got := []retry.Reason{retry.ReasonMaxAttempts, retry.ReasonDeadline}
	if diff := cmp.Diff([]retry.Reason{"max_attempts", "deadline"}, got); diff != "" {
		t.Errorf("reasons mismatch (-want +got):\n%s", diff)
	}
}

// TestErrorsThroughURLError checks what a user of an *http.Client sees: the
// client wraps the Transport's errors in *url.Error.
func TestErrorsThroughURLError(t *testing.T) {
	t.Parallel()
	se := statusErr(503)
	gaveUp := &retry.Error{Reason: retry.ReasonDeadline, Attempts: 2, Err: se}
	err := urlErr(gaveUp)
	if re, ok := errors.AsType[*retry.Error](err); !ok || re != gaveUp {
		t.Errorf("errors.As(*retry.Error) = %v, %v; want the wrapped one", re, ok)
	}
	if got, ok := errors.AsType[*retry.StatusError](err); !ok || got != se {
		t.Errorf("errors.As(*StatusError) = %v, %v; want the last attempt's", got, ok)
	}
	if !errors.Is(err, se) {
		t.Error("errors.Is(err, the last attempt's error) = false")
	}
	timedOut := urlErr(&retry.Error{Reason: retry.ReasonMaxAttempts, Attempts: 5, Err: context.DeadlineExceeded})
	if !errors.Is(timedOut, context.DeadlineExceeded) {
		t.Error("errors.Is(context.DeadlineExceeded) through *url.Error and *retry.Error = false")
	}

	_, invalid := retry.Do(t.Context(), retry.Policy{MaxAttempts: -1}, (&loopScript{}).fn)
	if !errors.Is(urlErr(invalid), retry.ErrInvalidPolicy) {
		t.Errorf("errors.Is(ErrInvalidPolicy) through *url.Error = false for %v", invalid)
	}

	ctx, cancel := context.WithCancel(t.Context())
	ft := retrytest.NewFakeTime()
	_, canceled := retry.Do(ctx, withFakeTime(retry.Policy{}, ft), func(context.Context) (int, error) {
		cancel()
		return 0, se
	})
	err = urlErr(canceled)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(context.Canceled) through *url.Error = false for %v", canceled)
	}
	if got, ok := errors.AsType[*retry.StatusError](err); !ok || got != se {
		t.Errorf("errors.As(*StatusError) through *url.Error = %v, %v; want the attempt's", got, ok)
	}
}

// TestStatusErrorMessageUnknownStatus: Anthropic's 529 reads as
// "Overloaded", whether the status line carried Go's placeholder (HTTP/1)
// or no reason at all (HTTP/2).
func TestStatusErrorMessageUnknownStatus(t *testing.T) {
	for _, status := range []string{"529 status code 529", "529 ", "529", "529 Overloaded"} {
		base := fixedStatusBase{code: 529, status: status}
		var got string
		tr := retry.NewTransport(base, retry.Policy{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil },
			OnRetry: func(e retry.Event) { got = e.Err.Error() }})
		req, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := "retry: HTTP 529 Overloaded"; got != want {
			t.Errorf("status %q: error %q, want %q", status, got, want)
		}
	}
}

// fixedStatusBase answers every request with one status line and no body.
type fixedStatusBase struct {
	code   int
	status string
}

func (b fixedStatusBase) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: b.code, Status: b.status, Header: http.Header{}, Body: http.NoBody}, nil
}

// TestStatusMessageMatchesStandardNames: the fast path's constant
// messages agree with the code and its standard name.
func TestStatusMessageMatchesStandardNames(t *testing.T) {
	for _, code := range []int{400, 408, 429, 500, 502, 503, 504, 529, 599, 999} {
		base := fixedStatusBase{code: code, status: strconv.Itoa(code) + " whatever the server says"}
		var got string
		tr := retry.NewTransport(base, retry.Policy{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil },
			Retryable: func(err error) bool { got = err.Error(); return false }})
		req, _ := http.NewRequest(http.MethodGet, "http://example.invalid/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		name := http.StatusText(code)
		if code == 529 {
			name = "Overloaded"
		}
		if want := strings.TrimSpace("retry: HTTP " + strconv.Itoa(code) + " " + name); got != want {
			t.Errorf("code %d: %q, want %q", code, got, want)
		}
	}
}

// TestErrorTimeout: a call that gave up on time is a timeout to callers
// who ask as net/http's do, through (*url.Error).Timeout; one that gave up
// on anything else is not.
func TestErrorTimeout(t *testing.T) {
	t.Parallel()
	netTimeout := &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name string
		err  *retry.Error
		want bool
	}{
		{"the Deadline", &retry.Error{Reason: retry.ReasonDeadline, Attempts: 2, Err: errors.New("503")}, true},
		{"attempts that timed out", &retry.Error{Reason: retry.ReasonMaxAttempts, Attempts: 3, Err: context.DeadlineExceeded}, true},
		{"a net.Error that timed out", &retry.Error{Reason: retry.ReasonMaxAttempts, Attempts: 3, Err: netTimeout}, true},
		{"a refused connection", &retry.Error{Reason: retry.ReasonMaxAttempts, Attempts: 3, Err: syscall.ECONNREFUSED}, false},
		{"the Budget", &retry.Error{Reason: retry.ReasonBudget, Attempts: 1, Err: errors.New("503")}, false},
	}
	for _, tt := range tests {
		ue := &url.Error{Op: "Get", URL: "http://api.example/", Err: tt.err}
		if got := ue.Timeout(); got != tt.want {
			t.Errorf("%s: (*url.Error).Timeout() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
