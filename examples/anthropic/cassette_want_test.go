package main

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/pace"
)

// This file says, from a response's headers alone, what docs/pacing.md
// says a Pacer learns from it: the expectation the replayed recordings are
// checked against, written apart from the Pacer's own parsers.

// Anthropic's header prefixes, each followed by -Limit, -Remaining and
// -Reset: requests, and the tokens dimensions in the Pacer's order of
// preference (the combined tokens when sent, else the input tokens, which
// a request's Cost can know before it is sent).
const (
	requestsPrefix = "Anthropic-Ratelimit-Requests"
	tokensPrefix   = "Anthropic-Ratelimit-Tokens"
	inputPrefix    = "Anthropic-Ratelimit-Input-Tokens"
)

// unpaced are the rate-limit headers the Pacer does not read by design,
// and why. Any other Anthropic rate-limit header is one it should know.
var unpaced = map[string]string{
	"Anthropic-Ratelimit-Output-Tokens": "output tokens are not known before a request is sent, so no Cost counts them",
}

// maxReset is the furthest reset or Retry-After the docs say is believed.
const maxReset = 24 * time.Hour

// wantReport returns what the Pacer should report of a response with
// status and headers h, read at now, and false when it should report
// nothing: no rate-limit headers that can be true, and no Retry-After that
// holds the key.
func wantReport(h http.Header, status int, now time.Time) (pace.Report, bool) {
	date := now
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		date = d // the resets are read against the server's own clock
	}
	var r pace.Report
	r.Requests, _ = headerLimit(h, requestsPrefix, date)
	var ok bool
	if r.Tokens, ok = headerLimit(h, tokensPrefix, date); !ok {
		r.Tokens, _ = headerLimit(h, inputPrefix, date)
	}
	r.Block = wantBlock(h, status, now)
	return r, r.Requests.Limit > 0 || r.Tokens.Limit > 0 || r.Block > 0
}

// headerLimit reads the dimension whose headers start with prefix, as a
// bucket full again at the RFC 3339 reset time, date being the response's
// Date. It reports false when a header is missing or the numbers cannot
// be true.
func headerLimit(h http.Header, prefix string, date time.Time) (pace.Limit, bool) {
	limit, err1 := strconv.ParseUint(h.Get(prefix+"-Limit"), 10, 53)
	remaining, err2 := strconv.ParseUint(h.Get(prefix+"-Remaining"), 10, 53)
	at, err3 := time.Parse(time.RFC3339, h.Get(prefix+"-Reset"))
	if err1 != nil || err2 != nil || err3 != nil || limit == 0 || remaining > limit {
		return pace.Limit{}, false
	}
	reset := max(at.Sub(date), 0) // a reset already past: full now
	if reset > maxReset {
		return pace.Limit{}, false
	}
	var rounding time.Duration
	if at.Nanosecond() == 0 {
		rounding = time.Second // written to the second, as Date is
	}
	l, left := float64(limit), float64(remaining)
	return pace.Limit{Limit: l, Remaining: left, Rate: wantRate(l, left, reset, rounding)}, true
}

// wantRate is the refill rate, per second, of a token bucket of limit
// with remaining left and full again in reset, read to within rounding,
// as docs/pacing.md states it. Until a response shows the rate (the
// bucket is full, or full again now), the limit is per minute. Else the
// rate (limit - remaining) / reset is taken to be the limit per minute,
// second, hour or day, the first of those that fits it within 5% and the
// rounding; else it is the estimate itself, the reset counted a rounding
// longer, erring slow.
func wantRate(limit, remaining float64, reset, rounding time.Duration) float64 {
	used := limit - remaining
	if used == 0 || reset == 0 {
		return limit / 60
	}
	slowest := used / (reset + rounding).Seconds()
	fastest := math.Inf(1)
	if reset > rounding {
		fastest = used / (reset - rounding).Seconds()
	}
	for _, period := range [...]float64{60, 1, 3600, 86400} {
		if r := limit / period; r >= slowest/1.05 && r <= fastest*1.05 {
			return r
		}
	}
	return slowest
}

// wantBlock is how long a response with status and headers h, read at now,
// holds every caller of its key: the server's retry-after-ms or
// Retry-After on a refusal (429 Too Many Requests, 503 Service Unavailable,
// or Anthropic's 529 Overloaded), with jitter off. Zero when it does not.
func wantBlock(h http.Header, status int, now time.Time) time.Duration {
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, 529:
	default:
		return 0
	}
	var d time.Duration
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		d = time.Duration(min(ms, float64(maxReset.Milliseconds()+1)) * float64(time.Millisecond))
	} else if s, err := strconv.ParseUint(h.Get("Retry-After"), 10, 32); err == nil {
		d = time.Duration(s) * time.Second
	} else if at, err := http.ParseTime(h.Get("Retry-After")); err == nil {
		d = at.Sub(now)
	}
	if d <= 0 || d > maxReset {
		return 0
	}
	return d
}

// hasRateLimit reports whether h carries any of Anthropic's rate-limit
// headers, or a Retry-After.
func hasRateLimit(h http.Header) bool {
	for k := range h {
		if isRateHeader(k) || k == "Retry-After" || k == "Retry-After-Ms" {
			return true
		}
	}
	return false
}

// isRateHeader reports whether the canonical header name k is one of
// Anthropic's rate-limit headers: the standard ones, or those of the
// Priority Tier.
func isRateHeader(k string) bool {
	return strings.HasPrefix(k, "Anthropic-Ratelimit-") || strings.HasPrefix(k, "Anthropic-Priority-")
}

// checkUnread fails for each of Anthropic's rate-limit headers in h that
// the Pacer neither reads nor leaves out by design: a form it should learn
// to read.
func checkUnread(t *testing.T, key string, h http.Header) {
	t.Helper()
	for k, vs := range h {
		if !isRateHeader(k) {
			continue
		}
		i := strings.LastIndexByte(k, '-')
		prefix, suffix := k[:i], k[i:]
		if suffix == "-Limit" || suffix == "-Remaining" || suffix == "-Reset" {
			switch prefix {
			case requestsPrefix, tokensPrefix, inputPrefix:
				continue
			}
			if _, ok := unpaced[prefix]; ok {
				continue
			}
		}
		t.Errorf("%s: the Pacer does not read %s: %q", key, k, vs)
	}
}
