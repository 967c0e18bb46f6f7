package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDuration is the longest time.Duration; huge hints saturate to it.
const maxDuration = time.Duration(math.MaxInt64)

// ParseRetryAfter reads the server's hint of how long to wait before the next
// request from h, relative to now.
//
// The retry-after-ms header (milliseconds, a fraction allowed; sent by
// OpenAI and Anthropic) wins when it is present and valid. Otherwise
// Retry-After is read as delta-seconds or as an HTTP-date in any of the three
// forms [net/http.ParseTime] accepts (RFC 9110, section 10.2.3). A date in the
// past gives (0, true).
//
// Missing, empty, negative or malformed values give (0, false). ParseRetryAfter
// never panics and never returns a negative duration; a value too large for a
// [time.Duration] saturates at the largest one, which any Policy's Deadline
// then turns into a prompt give-up.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v, ok := headerValue(h, "Retry-After-Ms"); ok {
		if d, ok := parseDecimal(v, float64(time.Millisecond)); ok {
			return d, true
		}
	}
	v, ok := headerValue(h, "Retry-After")
	if !ok {
		return 0, false
	}
	if d, ok := parseDecimal(v, float64(time.Second)); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates rather than overflows
	if d < 0 {
		d = 0
	}
	return d, true
}

// headerValue returns the first value of the canonical key k, trimmed of
// optional white space, and whether it is non-empty.
func headerValue(h http.Header, k string) (string, bool) {
	vs := h[k]
	if len(vs) == 0 {
		return "", false
	}
	v := strings.TrimSpace(vs[0])
	return v, v != ""
}

// plainDecimal reports whether s is digits with at most one decimal point
// ("12", "1.5", ".5"): no sign, exponent, hex, "Inf" or "NaN", all of which
// strconv would take.
func plainDecimal(s string) bool {
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// parseDecimal reads digits with at most one decimal point ("12", "1.5",
// ".5") as a count of unit nanoseconds. Signs, exponents, hex, "Inf" and
// "NaN", which strconv would take, are refused: none is a valid hint.
func parseDecimal(s string, unit float64) (time.Duration, bool) {
	if !plainDecimal(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && f == 0 { // a range error still gives +Inf, handled below
		return 0, false
	}
	ns := f * unit
	if ns >= float64(maxDuration) {
		return maxDuration, true
	}
	return time.Duration(ns), true
}
