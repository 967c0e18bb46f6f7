package retryotel

import (
	"net/http"

	"github.com/retrykit/retry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter that records the
// retry metrics.
const ScopeName = "github.com/retrykit/retry/retryotel"

// Config says where retries are reported. The zero Config reports to the
// global providers (otel.GetMeterProvider, otel.GetTracerProvider and
// otel.GetTextMapPropagator), resolved when Instrument or NewTransport is
// called; the global ones delegate to whatever is installed later. A Config
// is a plain value and is never written to.
type Config struct {
	// MeterProvider gives the meter of the retry metrics, and NewTransport
	// passes it to otelhttp. Nil means the global MeterProvider.
	MeterProvider metric.MeterProvider

	// TracerProvider is passed by NewTransport to otelhttp, which makes the
	// span of each attempt. Instrument does not use it: it adds events to
	// the caller's span, whichever provider made it. Nil means the global
	// TracerProvider.
	TracerProvider trace.TracerProvider

	// Propagators is passed by NewTransport to otelhttp, which injects each
	// attempt's trace context into its headers. Nil means the global
	// propagator.
	Propagators propagation.TextMapPropagator

	// HTTPOptions are more options for the otelhttp transport that
	// NewTransport builds, applied after the three above. Nil means none.
	HTTPOptions []otelhttp.Option
}

// Instrument returns p with its OnRetry and OnDone hooks wrapped so that
// every call made under it is reported: each retry as an event on the
// caller's span (the span in the context given to [retry.Do] or carried by
// the request), and each call's end as metric points. p's own hooks are
// still called, once each, after the recording.
//
// The instruments are created here, once: call Instrument when the Policy
// is built, not for every call, and only once per Policy, since a Policy
// instrumented twice reports everything twice. A failure to create an
// instrument goes to otel.Handle and leaves that instrument silent.
func Instrument(p retry.Policy, c Config) retry.Policy {
	m := newMetrics(c.MeterProvider)
	onRetry, onDone := p.OnRetry, p.OnDone
	p.OnRetry = func(ev retry.Event) {
		retryEvent(ev)
		if onRetry != nil {
			onRetry(ev)
		}
	}
	p.OnDone = func(o retry.Outcome) {
		m.record(o)
		giveUpEvent(o)
		if onDone != nil {
			onDone(o)
		}
	}
	return p
}

// NewTransport returns a [retry.Transport] that sends each attempt through
// otelhttp, and so makes one CLIENT span per attempt, marks resends with
// [ResendCount], and reports retries by [Instrument]:
//
//	retry.NewTransport(otelhttp.NewTransport(ResendCount(base), ...), Instrument(p, c))
//
// The order matters. otelhttp goes inside the retry layer: outside, it would
// see one request and make one span for the whole call, sleeps included,
// where the HTTP semantic conventions ask for a span per request sent.
// ResendCount goes inside otelhttp, so that the span it marks exists. base
// nil means http.DefaultTransport. Call NewTransport once and share the
// Transport: like any Transport it is safe for concurrent use.
func NewTransport(base http.RoundTripper, p retry.Policy, c Config) *retry.Transport {
	opts := make([]otelhttp.Option, 0, 3+len(c.HTTPOptions))
	if c.TracerProvider != nil {
		opts = append(opts, otelhttp.WithTracerProvider(c.TracerProvider))
	}
	if c.MeterProvider != nil {
		opts = append(opts, otelhttp.WithMeterProvider(c.MeterProvider))
	}
	if c.Propagators != nil {
		opts = append(opts, otelhttp.WithPropagators(c.Propagators))
	}
	opts = append(opts, c.HTTPOptions...)
	return retry.NewTransport(otelhttp.NewTransport(ResendCount(base), opts...), Instrument(p, c))
}

// resendCountKey is the attribute of the HTTP semantic conventions that
// numbers the resends of a request: absent on the first attempt, 1 on the
// second.
const resendCountKey = attribute.Key("http.request.resend_count")

// ResendCount returns a RoundTripper that sends requests through base (nil:
// http.DefaultTransport) and, for the second and later attempts of a
// [retry.Transport] call, sets http.request.resend_count (the attempt's
// number minus one) on the span in the request's context. Place it
// directly inside otelhttp, itself inside the retry.Transport, so that the
// span is the attempt's own; see [NewTransport]. A request that is not an
// attempt, or whose span is not recording, passes through untouched. The
// RoundTripper is safe for concurrent use if base is.
func ResendCount(base http.RoundTripper) http.RoundTripper {
	return resendCount{base: base}
}

type resendCount struct {
	base http.RoundTripper // nil: http.DefaultTransport
}

func (r resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if n, ok := retry.AttemptFromContext(ctx); ok && n > 1 {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(resendCountKey.Int(n - 1))
		}
	}
	base := r.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}
