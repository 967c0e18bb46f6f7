package retry_test

import (
	"bytes"
	"context"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

func FuzzParseRetryAfter(f *testing.F) {
	seeds := []struct {
		ms, ra       string
		hasMS, hasRA bool
	}{
		{ms: "1500", hasMS: true, ra: "7", hasRA: true},
		{ms: "250.5", hasMS: true},
		{ms: "soon", hasMS: true, ra: "7", hasRA: true},
		{ra: "7", hasRA: true},
		{ra: "Thu, 01 Jan 2026 00:00:30 GMT", hasRA: true},
		{ra: "Thursday, 01-Jan-26 00:00:30 GMT", hasRA: true},
		{ra: "Thu Jan  1 00:00:30 2026", hasRA: true},
		{ra: "Wed, 31 Dec 2025 23:59:00 GMT", hasRA: true},
		{ra: "Fri, 31 Dec 9999 23:59:59 GMT", hasRA: true},
		{ra: "123456789012345678901234567890", hasRA: true},
		{ms: "123456789012345678901234567890", hasMS: true},
		{ra: "1700000000", hasRA: true},
		{ms: "-5", hasMS: true, ra: "-5", hasRA: true},
		{ms: "1e3", hasMS: true, ra: "0x10", hasRA: true},
		{ms: "NaN", hasMS: true, ra: "Inf", hasRA: true},
		{ms: " ", hasMS: true, ra: "", hasRA: true},
		{ms: "+5", hasMS: true, ra: ".", hasRA: true},
		{},
	}
	for _, s := range seeds {
		f.Add(s.ms, s.hasMS, s.ra, s.hasRA)
	}
	f.Fuzz(func(t *testing.T, ms string, hasMS bool, ra string, hasRA bool) {
		msOnly, raOnly, both := http.Header{}, http.Header{}, http.Header{}
		if hasMS {
			msOnly.Set("Retry-After-Ms", ms)
			both.Set("Retry-After-Ms", ms)
		}
		if hasRA {
			raOnly.Set("Retry-After", ra)
			both.Set("Retry-After", ra)
		}
		d, ok := retry.ParseRetryAfter(both, raNow)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q, %q) = %v, negative", ms, ra, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q, %q) = (%v, false), want 0 with false", ms, ra, d)
		}
		if !hasMS && !hasRA && ok {
			t.Fatalf("ParseRetryAfter(no headers) = (%v, true), want (0, false)", d)
		}
		// retry-after-ms wins when valid; otherwise Retry-After decides alone.
		wantD, wantOK := retry.ParseRetryAfter(msOnly, raNow)
		if !wantOK {
			wantD, wantOK = retry.ParseRetryAfter(raOnly, raNow)
		}
		if d != wantD || ok != wantOK {
			t.Fatalf("ParseRetryAfter(%q, %q) = (%v, %v), want (%v, %v) from the headers one by one",
				ms, ra, d, ok, wantD, wantOK)
		}
	})
}

// backoffBound is min(cap, base*2^(attempt-1)), attempt below 1 counting as
// 1, computed with big integers; 0 when base or cap is not positive.
func backoffBound(attempt int, base, cap int64) time.Duration {
	if base <= 0 || cap <= 0 {
		return 0
	}
	// Beyond a shift of 64 every positive base exceeds any int64 cap.
	shift := min(max(attempt, 1)-1, 64)
	b := new(big.Int).Lsh(big.NewInt(base), uint(shift))
	if b.Cmp(big.NewInt(cap)) > 0 {
		return time.Duration(cap)
	}
	return time.Duration(b.Int64())
}

func FuzzBackoff(f *testing.F) {
	f.Add(1, int64(500*time.Millisecond), int64(4*time.Second), 1.0)
	f.Add(1000, int64(500*time.Millisecond), int64(30*time.Second), 1.0)
	f.Add(63, int64(1), int64(math.MaxInt64), 1.0)
	f.Add(64, int64(1), int64(math.MaxInt64), 1.0)
	f.Add(65, int64(1), int64(math.MaxInt64), 0.5)
	f.Add(0, int64(time.Second), int64(time.Minute), 1.0)
	f.Add(-5, int64(time.Second), int64(time.Minute), 1.0)
	f.Add(1, int64(math.MaxInt64), int64(math.MaxInt64), math.Nextafter(1, 0))
	f.Add(2, int64(10*time.Second), int64(4*time.Second), 0.5)
	f.Add(3, int64(500*time.Millisecond), int64(4*time.Second), math.NaN())
	f.Add(3, int64(500*time.Millisecond), int64(4*time.Second), -1.0)
	f.Add(3, int64(500*time.Millisecond), int64(4*time.Second), math.Inf(1))
	f.Add(math.MaxInt, int64(1), int64(math.MaxInt64), 0.999)
	f.Add(1, int64(-1), int64(5), 1.0)
	f.Fuzz(func(t *testing.T, attempt int, base, cap int64, r float64) {
		got := retry.Backoff(attempt, time.Duration(base), time.Duration(cap), func() float64 { return r })
		bound := backoffBound(attempt, base, cap)
		if got < 0 || got > bound {
			t.Fatalf("Backoff(%d, %d, %d, %v) = %d, want within [0, %d]", attempt, base, cap, r, got, bound)
		}
		if cap > 0 && got > time.Duration(cap) {
			t.Fatalf("Backoff(%d, %d, %d, %v) = %d, above the cap", attempt, base, cap, r, got)
		}
		var want float64 // r clamped to [0, 1], NaN as 1, times the bound
		switch {
		case math.IsNaN(r) || r >= 1:
			want = float64(bound)
		case r > 0:
			want = r * float64(bound)
		}
		if diff := math.Abs(float64(got) - want); diff > 1+want*1e-15 {
			t.Fatalf("Backoff(%d, %d, %d, %v) = %d, want about %.0f", attempt, base, cap, r, got, want)
		}
	})
}

// FuzzRateLimitHint sends one request through a Transport whose base
// answers every attempt with status and the fuzzed hint headers: whatever
// they hold, nothing panics, the Transport never sleeps past the Deadline,
// sends at most MaxAttempts times, and a plain 403 is never retried.
func FuzzRateLimitHint(f *testing.F) {
	reset := func(d time.Duration) string {
		return strconv.FormatInt(raNow.Add(d).Unix(), 10)
	}
	seeds := []struct {
		status                   int
		ra, ms, remaining, reset string
	}{
		{status: 429, remaining: "0", reset: reset(2 * time.Second)},
		{status: 403, remaining: "0", reset: reset(time.Hour)},
		{status: 403, remaining: "0", reset: reset(-time.Hour)},
		{status: 403, ra: "0"},
		{status: 403, ms: "0"},
		{status: 403, ra: "Thu, 01 Jan 2026 00:00:30 GMT"},
		{status: 429, ra: "1", remaining: "0", reset: reset(time.Minute)},
		{status: 429, remaining: "0", reset: "-1"},
		{status: 429, remaining: "0", reset: "1e9"},
		{status: 429, remaining: "0", reset: "9223372036854775807"},
		{status: 429, remaining: "0", reset: "99999999999999999999999"},
		{status: 429, remaining: "0", reset: "253402300799"},
		{status: 429, remaining: "0", reset: "253402300800"},
		{status: 429, remaining: "00", reset: " 1767225602 "},
		{status: 403, remaining: "-0", reset: reset(time.Second)},
		{status: 403},
		{status: 503, remaining: "0", reset: reset(time.Second)},
	}
	for _, s := range seeds {
		f.Add(s.status, s.ra, s.ms, s.remaining, s.reset)
	}
	f.Fuzz(func(t *testing.T, status int, ra, ms, remaining, reset string) {
		if status < 400 || status > 599 {
			status = 400 + (status%200+200)%200
		}
		h := http.Header{}
		for k, v := range map[string]string{"Retry-After": ra, "Retry-After-Ms": ms,
			"X-Ratelimit-Remaining": remaining, "X-Ratelimit-Reset": reset} {
			if v != "" {
				h.Set(k, v)
			}
		}
		se := &retry.StatusError{StatusCode: status, Response: &http.Response{StatusCode: status, Header: h}}
		retryable := retry.IsRetryable(se)
		if status == http.StatusForbidden && ra == "" && ms == "" && remaining == "" && retryable {
			t.Fatalf("IsRetryable(plain 403) = true")
		}

		ft := retrytest.NewFakeTime() // its clock starts at raNow
		const deadline = time.Minute
		sends := 0
		tr := &retry.Transport{
			Base: baseFunc(func(req *http.Request) (*http.Response, error) {
				sends++
				return &http.Response{StatusCode: status, Header: h.Clone(),
					Body: http.NoBody, Request: req}, nil
			}),
			Policy: retry.Policy{MaxAttempts: 4, Deadline: deadline,
				Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
		}
		req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if sends > 4 {
			t.Fatalf("%d sends, want at most 4", sends)
		}
		if !retryable && sends != 1 {
			t.Fatalf("not retryable, yet %d sends", sends)
		}
		if slept := ft.Slept(); slept >= deadline {
			t.Fatalf("slept %v, past the %v Deadline", slept, deadline)
		}
	})
}

// baseFunc is a base RoundTripper made of a function.
type baseFunc func(*http.Request) (*http.Response, error)

func (f baseFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// FuzzReplayBuffer sends a body without GetBody through a Transport with
// a ReplayBuffer of limit bytes, to a base whose attempts follow script:
// each byte reads part of the body (or all of it) in reads of odd sizes,
// then fails, answers 503 or answers 200. Whatever the script, every
// attempt reads a prefix of the body, nothing is sent again once more than
// limit bytes were taken from the body, the ContentLength never changes,
// and the body is closed exactly once and never read after.
func FuzzReplayBuffer(f *testing.F) {
	f.Add([]byte("hello, world"), int64(64), []byte{0x01, 0x05, 0xfe}, true)
	f.Add(bytes.Repeat([]byte("abc"), 400), int64(1000), []byte{0xfd, 0x20, 0xfe}, false)
	f.Add(bytes.Repeat([]byte("x"), 5000), int64(4096), []byte{0xfc, 0xfd}, true)
	f.Add([]byte{}, int64(1), []byte{0x00, 0x01}, false)
	f.Add([]byte("tiny"), int64(0), []byte{0x01}, true)
	f.Fuzz(func(t *testing.T, body []byte, limit int64, script []byte, known bool) {
		body = body[:min(len(body), 64<<10)] // larger bodies only slow the search
		limit = max(limit%int64(2*len(body)+10), 0)
		src := newTrackedBody(bytes.NewReader(body))
		var got [][]byte
		var lengths []int64
		tr := &retry.Transport{
			ReplayBuffer: limit,
			Policy:       retry.Policy{MaxAttempts: 4, Sleep: func(context.Context, time.Duration) error { return nil }},
			Base: baseFunc(func(r *http.Request) (*http.Response, error) {
				step := byte(0xfe) // read all, answer 200
				if i := len(got); i < len(script) {
					step = script[i]
				}
				lengths = append(lengths, r.ContentLength)
				want := int(step>>2) * 7
				if step>>2 == 63 {
					want = math.MaxInt
				}
				var read []byte
				buf := make([]byte, 1+int(step)%13)
				for len(read) < want {
					n, err := r.Body.Read(buf[:min(len(buf), want-len(read))])
					read = append(read, buf[:n]...)
					if err != nil {
						break
					}
				}
				r.Body.Close()
				got = append(got, read)
				switch step & 3 {
				case 0, 3:
					return nil, syscall.ECONNRESET
				case 1:
					return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
			}),
		}
		req, _ := http.NewRequest(http.MethodPut, "http://example.test/", nil)
		req.Body = src
		req.ContentLength = -1
		if known {
			req.ContentLength = int64(len(body))
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if len(got) > 4 {
			t.Fatalf("%d attempts, want at most 4", len(got))
		}
		taken := 0 // bytes taken from the body so far: the longest prefix read
		for i, b := range got {
			if !bytes.Equal(b, body[:len(b)]) {
				t.Fatalf("attempt %d read %q, not a prefix of %q", i+1, b, body)
			}
			if i > 0 && int64(taken) > limit {
				t.Fatalf("attempt %d sent again after %d bytes were taken, past the limit %d", i+1, taken, limit)
			}
			if lengths[i] != req.ContentLength {
				t.Fatalf("attempt %d: ContentLength %d, want %d", i+1, lengths[i], req.ContentLength)
			}
			taken = max(taken, len(b))
		}
		if closes, late := src.counts(); closes != 1 || late != 0 {
			t.Fatalf("body closed %d times, read %d times after Close; want 1 and 0", closes, late)
		}
	})
}
