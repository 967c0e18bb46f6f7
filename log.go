package retry

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
)

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
