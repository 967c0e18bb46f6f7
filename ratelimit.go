package retry

import (
	"net/http"
	"strconv"
	"time"

	"github.com/retrykit/retry/internal/wire"
)

// Rate limits as GitHub reports them: a 403 or 429 whose
// x-ratelimit-remaining is 0, with x-ratelimit-reset holding the Unix time,
// in seconds, when the quota comes back. GitHub also answers a secondary
// rate limit with a 403 and a Retry-After header. A 403 is otherwise final
// (a bad token, a missing scope), so the headers alone tell the two apart.

// maxResetUnix is the latest x-ratelimit-reset read as a date, the last
// second of the year 9999: anything later is absurd, and time.Unix would
// overflow well before math.MaxInt64.
const maxResetUnix = 253402300799

// statusHint returns the server's hint for a response with status 400 or
// more: Retry-After or retry-after-ms when valid, else, for a 403 or 429
// whose rate limit is spent, the time until x-ratelimit-reset. It reads
// p's clock only when a header needs dating.
func statusHint(resp *http.Response, p *Policy) time.Duration {
	h := resp.Header
	if hasRetryAfter(h) {
		if d, ok := ParseRetryAfter(h, p.now()); ok {
			return d
		}
	}
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) &&
		limitSpent(h) {
		if d, ok := parseReset(h, p.now()); ok {
			return d
		}
	}
	return 0
}

// hasRetryAfter reports whether h holds a header ParseRetryAfter reads.
func hasRetryAfter(h http.Header) bool {
	return len(h["Retry-After-Ms"]) > 0 || len(h["Retry-After"]) > 0
}

// limitSpent reports an x-ratelimit-remaining header of 0.
func limitSpent(h http.Header) bool {
	v, ok := wire.HeaderValue(h, "X-Ratelimit-Remaining")
	if !ok {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '0' {
			return false
		}
	}
	return true
}

// parseReset reads x-ratelimit-reset as the time from now until the quota
// returns (see resetIsDelta): 0 for a time past, the largest Duration for
// an absurd one (which any Deadline turns into a prompt give-up), and
// (0, false) for a missing, negative or malformed value.
func parseReset(h http.Header, now time.Time) (time.Duration, bool) {
	v, ok := wire.HeaderValue(h, "X-Ratelimit-Reset")
	if !ok {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' { // no sign, no fraction, no exponent
			return 0, false
		}
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil || sec > maxResetUnix { // only a range error is left
		return wire.MaxDuration, true
	}
	if wire.ResetIsDelta(float64(sec)) {
		return time.Duration(sec) * time.Second, true
	}
	d := time.Unix(sec, 0).Sub(now) // saturates rather than overflows
	if d < 0 {
		d = 0
	}
	return d, true
}

// rateLimited reports a 403 that is a rate limit rather than a refusal: it
// has a valid Retry-After or retry-after-ms (0 included), its rate limit is
// spent (x-ratelimit-remaining: 0), or, for a StatusError made without a
// Response, a RetryAfter hint.
func (e *StatusError) rateLimited() bool {
	if e.StatusCode != http.StatusForbidden {
		return false
	}
	if e.RetryAfter > 0 {
		return true
	}
	if e.Response == nil {
		return false
	}
	h := e.Response.Header
	if limitSpent(h) {
		return true
	}
	if !hasRetryAfter(h) {
		return false
	}
	// Validity does not depend on the time: a date in the past is valid.
	_, ok := ParseRetryAfter(h, time.Time{})
	return ok
}

// shouldRetry reads the server's own word on whether the request may be
// sent again, whatever its status: x-should-retry (OpenAI, Anthropic) and
// Stripe-Should-Retry (Stripe), each "true" or "false". When both are
// present and disagree, false wins: one of the servers' layers says the
// request must not be repeated.
func (e *StatusError) shouldRetry() (v, ok bool) {
	if e.Response == nil {
		return false, false
	}
	h := e.Response.Header
	a, aok := boolHeader(h["X-Should-Retry"]) // canonical: no Get, no key copy
	b, bok := boolHeader(h["Stripe-Should-Retry"])
	switch {
	case aok && bok:
		return a && b, true
	case aok:
		return a, true
	}
	return b, bok
}

// boolHeader reads the first of vs as "true" or "false"; anything else is
// no word at all.
func boolHeader(vs []string) (v, ok bool) {
	if len(vs) == 0 {
		return false, false
	}
	switch vs[0] {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
