package retryotel

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/retrykit/retry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The metric names, in the shape of gRPC's per-call retry metrics
// (grpc.client.call.retries, grpc.client.call.retry_delay): the library's
// name where gRPC puts its own, then client.call because each point is one
// call's total, recorded once when the call ends. Per-attempt measures are
// otelhttp's (http.client.request.duration).
const (
	nameRetries  = "retry.client.call.retries"
	nameDelay    = "retry.client.call.retry_delay"
	nameGiveUps  = "retry.client.call.give_ups"
	nameRefusals = "retry.client.call.budget_refusals"
	nameWaits    = "retry.client.call.pacer_wait"
	nameHedges   = "retry.client.call.hedges"
)

// The attribute keys. The first three are the OpenTelemetry semantic
// conventions' own; none carries a URL path, a query or a key, so that the
// number of series stays small.
const (
	keyServerAddress = attribute.Key("server.address")
	keyMethod        = attribute.Key("http.request.method")
	keyErrorType     = attribute.Key("error.type")
	keyReason        = attribute.Key("retry.reason")
)

// Bucket bounds, as hints the SDK honours unless a View says otherwise. The
// SDK's default bounds (0, 5, 10, 25, ...) would put nearly every call in
// the first two buckets: calls make a few retries and sleep seconds.
var (
	retriesBounds = []float64{0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20}
	secondsBounds = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
)

// metrics holds the instruments, created once per Instrument.
type metrics struct {
	retries  metric.Int64Histogram
	delay    metric.Float64Histogram
	giveUps  metric.Int64Counter
	refusals metric.Int64Counter
	waits    metric.Float64Histogram
	hedges   metric.Int64Counter
}

// newMetrics creates the instruments on mp's meter (nil: the global
// MeterProvider). An instrument that fails to be created is reported to
// otel.Handle; the meter then returns one that records nothing, which is
// used as it is.
func newMetrics(mp metric.MeterProvider) *metrics {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	var m metrics
	var err error
	m.retries, err = meter.Int64Histogram(nameRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries made during the call; the first attempt is not a retry."),
		metric.WithExplicitBucketBoundaries(retriesBounds...))
	handle(err)
	m.delay, err = meter.Float64Histogram(nameDelay, metric.WithUnit("s"),
		metric.WithDescription("Time slept between the call's attempts, in all."),
		metric.WithExplicitBucketBoundaries(secondsBounds...))
	handle(err)
	m.giveUps, err = meter.Int64Counter(nameGiveUps, metric.WithUnit("{call}"),
		metric.WithDescription("Calls that stopped retrying without success, by retry.reason."))
	handle(err)
	m.refusals, err = meter.Int64Counter(nameRefusals, metric.WithUnit("{call}"),
		metric.WithDescription("Calls whose retry the retry budget refused."))
	handle(err)
	m.waits, err = meter.Float64Histogram(nameWaits, metric.WithUnit("s"),
		metric.WithDescription("Time the call waited for the pacer (rate limits, and slots under a concurrency limit), in all; calls that did not wait are not recorded."),
		metric.WithExplicitBucketBoundaries(secondsBounds...))
	handle(err)
	m.hedges, err = meter.Int64Counter(nameHedges, metric.WithUnit("{hedge}"),
		metric.WithDescription("Hedges sent: copies of an attempt that was slow to answer."))
	handle(err)
	return &m
}

func handle(err error) {
	if err != nil {
		otel.Handle(fmt.Errorf("retryotel: %w", err))
	}
}

// enabled reports whether any instrument would keep a measurement, so that
// a no-op provider costs no attribute set.
func (m *metrics) enabled(ctx context.Context) bool {
	return m.retries.Enabled(ctx) || m.delay.Enabled(ctx) || m.giveUps.Enabled(ctx) ||
		m.refusals.Enabled(ctx) || m.waits.Enabled(ctx) || m.hedges.Enabled(ctx)
}

// record reports the end of one call.
func (m *metrics) record(o retry.Outcome) {
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if !m.enabled(ctx) {
		return
	}
	var buf [4]attribute.KeyValue
	kv := callAttributes(buf[:0], o)
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	m.retries.Record(ctx, int64(max(0, o.Attempts-1-o.Hedges)), opt) // a hedge is no retry
	if o.Hedges > 0 {
		m.hedges.Add(ctx, int64(o.Hedges), opt)
	}
	m.delay.Record(ctx, o.Slept.Seconds(), opt)
	if o.Waited > 0 {
		m.waits.Record(ctx, o.Waited.Seconds(), opt)
	}
	if o.Reason == "" {
		return
	}
	if o.Reason == retry.ReasonBudget {
		m.refusals.Add(ctx, 1, opt)
	}
	kv = append(kv, keyReason.String(string(o.Reason)))
	m.giveUps.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(kv...)))
}

// callAttributes appends the attributes of a call to kv: the server and
// the method for a Transport's call, and the error's type when the call
// failed with one.
func callAttributes(kv []attribute.KeyValue, o retry.Outcome) []attribute.KeyValue {
	if r := o.Request; r != nil {
		if r.URL != nil {
			if host := r.URL.Hostname(); host != "" {
				kv = append(kv, keyServerAddress.String(host))
			}
		}
		kv = append(kv, keyMethod.String(method(r.Method)))
	}
	if err := outcomeErr(o); err != nil {
		kv = append(kv, keyErrorType.String(errorType(err)))
	}
	return kv
}

// method returns the request's method as the HTTP semantic conventions
// record it: a known method as it is, any other as _OTHER, so that a
// client sending made-up methods cannot multiply the series.
func method(m string) string {
	switch m {
	case "":
		return http.MethodGet // net/http's meaning of an empty method
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// outcomeErr is the error a call ended with: what it returned or, for a
// Transport that gave up on a retryable status and handed the response
// back, that status.
func outcomeErr(o retry.Outcome) error {
	if o.Err == nil && o.Reason != "" {
		return o.Last
	}
	return o.Err
}

// errorType names the kind of error a call failed with, in few enough
// values to be a metric attribute: "canceled" for a call its caller gave
// up on, "timeout" for a deadline, the status code of a retryable status,
// else the Go type of the error under the retry and URL wrappers.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	// The context's errors first: a call cut short by its caller wraps the
	// last attempt's error too, but it ended because of the context.
	var se *retry.StatusError
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &se):
		return strconv.Itoa(se.StatusCode)
	}
	for {
		var next error
		switch e := err.(type) {
		case *retry.Error:
			next = e.Err
		case *url.Error:
			next = e.Err
		}
		if next == nil {
			break
		}
		err = next
	}
	return fmt.Sprintf("%T", err)
}
