package retry_test

import (
	"math"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry"
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
