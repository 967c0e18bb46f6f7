package retry_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// raNow is the instant the Retry-After tests read dates against.
var raNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// header builds a header from key, value pairs.
func header(kv ...string) http.Header {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

type retryAfterCase struct {
	name   string
	h      http.Header
	want   time.Duration
	wantOK bool
}

// retryAfterGarbage are values no server means as a hint; each must give
// (0, false) under either header.
var retryAfterGarbage = []string{
	"soon", "-5", "", " ", "1e3", "0x10", "NaN", "Inf", "+Inf", "+5", "5s", "1,5", "1.2.3", ".", "٣",
	"Thu, 01 Jan 2026 00:00:30", "Thu, 32 Jan 2026 00:00:30 GMT",
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	const thirty = 30 * time.Second
	tests := []retryAfterCase{
		{name: "ms wins over Retry-After", h: header("retry-after-ms", "1500", "Retry-After", "7"), want: 1500 * time.Millisecond, wantOK: true},
		{name: "ms fraction", h: header("retry-after-ms", "250.5"), want: 250500 * time.Microsecond, wantOK: true},
		{name: "ms zero", h: header("retry-after-ms", "0", "Retry-After", "7"), want: 0, wantOK: true},
		{name: "invalid ms falls back", h: header("retry-after-ms", "soon", "Retry-After", "7"), want: 7 * time.Second, wantOK: true},
		{name: "negative ms falls back", h: header("retry-after-ms", "-5", "Retry-After", "7"), want: 7 * time.Second, wantOK: true},
		{name: "empty ms falls back", h: header("retry-after-ms", "", "Retry-After", "7"), want: 7 * time.Second, wantOK: true},
		{name: "delta-seconds", h: header("Retry-After", "7"), want: 7 * time.Second, wantOK: true},
		{name: "zero seconds", h: header("Retry-After", "0"), want: 0, wantOK: true},
		{name: "optional white space", h: header("Retry-After", " 7\t"), want: 7 * time.Second, wantOK: true},
		{name: "IMF-fixdate", h: header("Retry-After", "Thu, 01 Jan 2026 00:00:30 GMT"), want: thirty, wantOK: true},
		{name: "RFC 850 date", h: header("Retry-After", "Thursday, 01-Jan-26 00:00:30 GMT"), want: thirty, wantOK: true},
		{name: "asctime date", h: header("Retry-After", "Thu Jan  1 00:00:30 2026"), want: thirty, wantOK: true},
		{name: "past date", h: header("Retry-After", "Wed, 31 Dec 2025 23:59:00 GMT"), want: 0, wantOK: true},
		{name: "date far ahead saturates", h: header("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), want: maxDuration, wantOK: true},
		{name: "30 digits saturate", h: header("Retry-After", "123456789012345678901234567890"), want: maxDuration, wantOK: true},
		{name: "30 digits of ms saturate", h: header("retry-after-ms", "123456789012345678901234567890"), want: maxDuration, wantOK: true},
		{name: "a Unix timestamp is seconds", h: header("Retry-After", "1700000000"), want: 1700000000 * time.Second, wantOK: true},
		{name: "no header", h: http.Header{}},
		{name: "nil header", h: nil},
	}
	for _, v := range retryAfterGarbage {
		q := strconv.Quote(v)
		tests = append(tests,
			retryAfterCase{name: "Retry-After " + q, h: header("Retry-After", v)},
			retryAfterCase{name: "retry-after-ms " + q, h: header("retry-after-ms", v)},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retry.ParseRetryAfter(tt.h, raNow)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%v) = (%v, %v), want (%v, %v)", tt.h, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestDoRetryAfter checks that a server's hint is a floor under the backoff
// delay, and that a hint past the deadline ends the call at once.
func TestDoRetryAfter(t *testing.T) {
	t.Parallel()
	hint := func(d time.Duration) error { return &retry.StatusError{StatusCode: 429, RetryAfter: d} }
	tests := []struct {
		name         string
		rand         float64
		p            retry.Policy
		errs         []error
		wantSleeps   []time.Duration
		wantAttempts int // when the call gives up (by its deadline); 0: it succeeds
	}{
		{
			name: "hint beats a zero jittered delay", rand: 0,
			errs: []error{hint(7 * time.Second)}, wantSleeps: []time.Duration{7 * time.Second},
		},
		{
			name: "backoff beats a short hint, then a long hint wins", rand: 1,
			errs:       []error{hint(200 * time.Millisecond), hint(3 * time.Second)},
			wantSleeps: []time.Duration{500 * time.Millisecond, 3 * time.Second},
		},
		{
			name: "hint past the deadline fails at once", rand: 1,
			p:    retry.Policy{Deadline: 60 * time.Second},
			errs: []error{hint(120 * time.Second)}, wantAttempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := retrytest.NewFakeTime()
			ft.SetRand(constRand(tt.rand))
			sc := &loopScript{errs: tt.errs}
			got, err := retry.Do(t.Context(), withFakeTime(tt.p, ft), sc.fn)
			if tt.wantAttempts == 0 {
				if err != nil || got != "ok" {
					t.Errorf("Do = (%q, %v), want (\"ok\", nil)", got, err)
				}
			} else {
				checkGaveUp(t, err, retry.ReasonDeadline, tt.wantAttempts)
			}
			checkSleeps(t, ft, tt.wantSleeps...)
		})
	}
}
