package retry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// LogRetries returns a Policy.OnRetry that logs each retry to logger (nil:
// slog.Default()) at level Warn, with the attempt that failed, the delay,
// where the delay came from ("backoff" or "retry-after"), the host, the
// HTTP status and the server's request id when there were ones, and the
// error. A retry that is not made is no Event: LogOutcomes logs those. A
// hedge (Event.Hedge) is logged at level Debug as "hedging", with the
// attempt about to be sent and the wait before it.
//
// It never logs request headers or bodies, and it strips the query and
// user information from a URL in the error, since API keys travel there
// for some services.
func LogRetries(logger *slog.Logger) func(Event) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(e Event) {
		if e.Hedge { // a hedge is routine, and sent often: Debug
			attrs := failureAttrs([]slog.Attr{slog.Int("attempt", e.Attempt+1), slog.Duration("after", e.Delay)}, e.Request, e.Err)
			logger.LogAttrs(context.Background(), slog.LevelDebug, "hedging", attrs...)
			return
		}
		source := "backoff"
		if e.FromRetryAfter {
			source = "retry-after"
		}
		attrs := []slog.Attr{
			slog.Int("attempt", e.Attempt),
			slog.Duration("delay", e.Delay),
			slog.String("delay_source", source),
		}
		attrs = failureAttrs(attrs, e.Request, e.Err)
		logger.LogAttrs(context.Background(), slog.LevelWarn, "retrying", attrs...)
	}
}

// LogOutcomes returns a Policy.OnDone that logs, to logger (nil:
// slog.Default()) at level Warn, one line for each call that ended on a
// failure without being retried to success: when it gave up (the attempts,
// the Deadline or the Budget ran out) and when a failure the rules retry
// was not retried (Outcome.Reason: the request may not run twice, or its
// body cannot be sent again). The line has the reason, the attempts, the
// host, the HTTP status and the server's request id when there were ones,
// and the error. Calls that succeed, and failures no rule retries (a 400),
// are not logged, so a busy service logs only what a person would ask
// about. It redacts as LogRetries does.
func LogOutcomes(logger *slog.Logger) func(Outcome) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(o Outcome) {
		if o.Reason == "" {
			return
		}
		failure := o.Err
		if failure == nil {
			failure = o.Last
		}
		attrs := []slog.Attr{
			slog.String("reason", string(o.Reason)),
			slog.Int("attempts", o.Attempts),
		}
		attrs = failureAttrs(attrs, o.Request, failure)
		logger.LogAttrs(context.Background(), slog.LevelWarn, "not retried", attrs...)
	}
}

// failureAttrs appends to attrs the host of req, and the status, the
// server's request id and the text of err, where there are ones.
func failureAttrs(attrs []slog.Attr, req *http.Request, err error) []slog.Attr {
	if req != nil && req.URL != nil {
		attrs = append(attrs, slog.String("host", req.URL.Host))
	}
	if se, ok := errors.AsType[*StatusError](err); ok {
		attrs = append(attrs, slog.Int("status", se.StatusCode))
		if se.Response != nil {
			if id := requestID(se.Response.Header); id != "" {
				attrs = append(attrs, slog.String("request_id", id))
			}
		}
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", redact(err)))
	}
	return attrs
}

// requestID returns the first request id h holds, cut to 128 bytes of
// printable ASCII: it is the server's text, and goes into a log line. The
// headers are those in which servers name a request for their support: the
// de facto standard, Anthropic's and Stripe's, OpenAI's own, AWS's and
// GitHub's.
func requestID(h http.Header) string {
	for _, k := range [...]string{"X-Request-Id", "Request-Id", "Openai-Request-Id", "Anthropic-Request-Id",
		"X-Amzn-Requestid", "X-Amz-Request-Id", "X-Github-Request-Id"} {
		if v := h.Get(k); v != "" {
			v = strings.Map(func(r rune) rune {
				if r < 0x21 || r > 0x7e {
					return -1
				}
				return r
			}, v)
			return v[:min(len(v), 128)]
		}
	}
	return ""
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
