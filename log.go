package retry

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultLogWaitsMin is the shortest Pacer wait that LogWaits logs when
// given a minimum of zero: shorter waits are the Pacer's everyday spacing.
const DefaultLogWaitsMin = time.Second

// LogRetries returns a Policy.OnRetry that logs each retry to logger (nil:
// slog.Default()) at level Warn, with the attempt that failed, the delay,
// where the delay came from ("backoff" or "retry-after"), the HTTP status
// when there was one, and the error.
//
// It never logs request headers or bodies, and it strips the query and
// user information from a URL in the error, since API keys travel there
// for some services.
func LogRetries(logger *slog.Logger) func(Event) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(e Event) {
		source := "backoff"
		if e.FromRetryAfter {
			source = "retry-after"
		}
		attrs := []slog.Attr{
			slog.Int("attempt", e.Attempt),
			slog.Duration("delay", e.Delay),
			slog.String("delay_source", source),
		}
		if se, ok := errors.AsType[*StatusError](e.Err); ok {
			attrs = append(attrs, slog.Int("status", se.StatusCode))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", redact(e.Err)))
		}
		logger.LogAttrs(context.Background(), slog.LevelWarn, "retrying", attrs...)
	}
}

// LogWaits returns a Pacer.OnWait that logs each wait of at least threshold
// (zero: DefaultLogWaitsMin) to logger (nil: slog.Default()) at level Info,
// with the host, the attempt about to begin, the wait, and whether a
// Retry-After set it. Pacing waits are not retries, so LogRetries never
// sees them; a long one is worth a line, since it is time the caller
// spends before anything is sent. It never logs request headers.
func LogWaits(logger *slog.Logger, threshold time.Duration) func(PaceEvent) {
	if logger == nil {
		logger = slog.Default()
	}
	if threshold <= 0 {
		threshold = DefaultLogWaitsMin
	}
	return func(e PaceEvent) {
		if e.Delay < threshold {
			return
		}
		logger.LogAttrs(context.Background(), slog.LevelInfo, "pacing",
			slog.String("host", e.Host),
			slog.Int("attempt", e.Attempt),
			slog.Duration("delay", e.Delay),
			slog.Bool("retry_after", e.RetryAfter))
	}
}

// redact returns err's text with the URL of any *url.Error in it reduced
// to its scheme, host and path.
func redact(err error) string {
	msg := err.Error()
	ue, ok := errors.AsType[*url.Error](err)
	if !ok || ue.URL == "" {
		return msg
	}
	clean := "(URL withheld)"
	if u, perr := url.Parse(ue.URL); perr == nil {
		clean = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	}
	// url.Error quotes a URL that holds quotes or backslashes.
	msg = strings.ReplaceAll(msg, strconv.Quote(ue.URL), strconv.Quote(clean))
	return strings.ReplaceAll(msg, ue.URL, clean)
}
