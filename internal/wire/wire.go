// Package wire holds what package retry and package pace both read or do
// the same way: header values and decimals as servers send them, the
// furthest reset either believes, the time by a Policy's clock, and calls
// to a shared store bounded in time. It is internal so that neither
// package exports these to its users.
package wire

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

// MaxDuration is the longest time.Duration.
const MaxDuration = time.Duration(math.MaxInt64)

// MaxReset is the furthest reset, window or Retry-After believed: a day.
// A value further off is a server's mistake, or a Unix time.
const MaxReset = 24 * time.Hour

// ResetIsDelta reports whether an x-ratelimit-reset of secs counts
// seconds from now rather than a Unix time. Servers send both under the
// one name: GitHub and many gateways the Unix time at which the window
// ends, others (@fastify/rate-limit by default, Reddit) the seconds until
// then. The value tells them apart: a day or less is seconds from now, as
// no rate-limit window is longer and no Unix time that small (1970-01-02)
// is a server's present; anything more is a Unix time.
func ResetIsDelta(secs float64) bool { return secs <= MaxReset.Seconds() }

// StatusOverloaded is Anthropic's status for an API overloaded for
// everyone.
const StatusOverloaded = 529

// Now returns the time by c, or by the real clock when c is nil.
func Now(c clockwork.Clock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}

// HeaderValue returns the first value of the canonical key k, trimmed of
// optional white space, and whether it is non-empty.
func HeaderValue(h http.Header, k string) (string, bool) {
	vs := h[k]
	if len(vs) == 0 {
		return "", false
	}
	v := strings.TrimSpace(vs[0])
	return v, v != ""
}

// PlainDecimal reports whether s is digits with at most one decimal point
// ("12", "1.5", ".5"): no sign, exponent, hex, "Inf" or "NaN", all of which
// strconv would take.
func PlainDecimal(s string) bool {
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

// ParseDecimal reads digits with at most one decimal point ("12", "1.5",
// ".5") as a count of unit nanoseconds. Signs, exponents, hex, "Inf" and
// "NaN", which strconv would take, are refused: none is a valid hint.
func ParseDecimal(s string, unit float64) (time.Duration, bool) {
	if !PlainDecimal(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && f == 0 { // a range error still gives +Inf, handled below
		return 0, false
	}
	ns := f * unit
	if ns >= float64(MaxDuration) {
		return MaxDuration, true
	}
	return time.Duration(ns), true
}

// Host returns req's host, from its URL or else its Host field.
func Host(req *http.Request) string {
	if req.URL != nil && req.URL.Host != "" {
		return req.URL.Host
	}
	return req.Host
}

// CallWithin runs f with a context that ends after d, or when parent ends,
// and returns then even if f does not: a store that ignores its context (a
// Redis client whose socket reads are bounded by its own read timeout
// only, for one) must not hold a call up, nor keep a caller who has gone.
// f's results may be read only when CallWithin returns nil: a late f
// still writes them.
func CallWithin(parent context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, d)
	defer cancel()
	ch := make(chan error, 1) // buffered: a late f ends without a reader
	go func() { ch <- f(ctx) }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
