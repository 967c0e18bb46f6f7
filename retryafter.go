package retry

import (
	"net/http"
	"time"

	"github.com/retrykit/retry/internal/wire"
)

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
	if v, ok := wire.HeaderValue(h, "Retry-After-Ms"); ok {
		if d, ok := wire.ParseDecimal(v, float64(time.Millisecond)); ok {
			return d, true
		}
	}
	v, ok := wire.HeaderValue(h, "Retry-After")
	if !ok {
		return 0, false
	}
	if d, ok := wire.ParseDecimal(v, float64(time.Second)); ok {
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
