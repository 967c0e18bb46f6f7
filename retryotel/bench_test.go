package retryotel_test

import (
	"context"
	"time"

	"net/http"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
)

// benchRoundTrip sends GETs through rt to the in-memory base that answers
// 200, the success path where instrumentation must cost least.
func benchRoundTrip(b *testing.B, rt http.RoundTripper) {
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/v1/models", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
	}
}

// noopConfig reports to providers that drop everything.
var noopConfig = retryotel.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()}

// BenchmarkTransport is the baseline: a retry.Transport without retryotel.
func BenchmarkTransport(b *testing.B) {
	benchRoundTrip(b, retry.NewTransport(ok, retry.Policy{}))
}

// BenchmarkInstrumentNoop adds Instrument's hooks, with no-op providers.
func BenchmarkInstrumentNoop(b *testing.B) {
	benchRoundTrip(b, retry.NewTransport(ok, retryotel.Instrument(retry.Policy{}, noopConfig)))
}

// BenchmarkNewTransportNoop is the whole recipe (hooks, otelhttp and
// ResendCount), with no-op providers.
func BenchmarkNewTransportNoop(b *testing.B) {
	benchRoundTrip(b, retryotel.NewTransport(ok, retry.Policy{}, noopConfig))
}

// BenchmarkOtelhttpNoop is otelhttp alone inside the retry layer, with
// no-op providers: what the recipe costs before retryotel adds anything.
func BenchmarkOtelhttpNoop(b *testing.B) {
	base := otelhttp.NewTransport(ok, otelhttp.WithTracerProvider(noopConfig.TracerProvider),
		otelhttp.WithMeterProvider(noopConfig.MeterProvider))
	benchRoundTrip(b, retry.NewTransport(base, retry.Policy{}))
}

// BenchmarkInstrumentSDK records into the metrics SDK, for comparison: the
// cost when the metrics are really kept.
func BenchmarkInstrumentSDK(b *testing.B) {
	tel := newTelemetry(b)
	benchRoundTrip(b, retry.NewTransport(ok, retryotel.Instrument(retry.Policy{}, tel.config())))
}

// BenchmarkHooksNoop calls the hooks Instrument installs, as one call with
// one retry would, with no-op providers: retryotel's own cost, without the
// Transport's.
func BenchmarkHooksNoop(b *testing.B) {
	p := retryotel.Instrument(retry.Policy{}, noopConfig)
	ctx := context.Background()
	ev := retry.Event{Attempt: 1, Err: unavailable, Delay: time.Second, Context: ctx}
	o := retry.Outcome{Attempts: 2, Slept: time.Second, Context: ctx}
	b.ReportAllocs()
	for b.Loop() {
		p.OnRetry(ev)
		p.OnDone(o)
	}
}
