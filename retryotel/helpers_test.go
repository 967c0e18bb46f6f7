package retryotel_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/retrykit/retry/retryotel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// telemetry is an in-memory OpenTelemetry pipeline: spans land in a
// SpanRecorder, metrics are read on demand from a ManualReader.
type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t testing.TB) *telemetry {
	t.Helper()
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() {
		_ = tel.tp.Shutdown(context.Background())
		_ = tel.mp.Shutdown(context.Background())
	})
	return tel
}

// config reports to the in-memory pipeline, with W3C trace context headers.
func (tel *telemetry) config() retryotel.Config {
	return retryotel.Config{MeterProvider: tel.mp, TracerProvider: tel.tp, Propagators: propagation.TraceContext{}}
}

// points returns the retry metrics read so far, one line per data point,
// sorted: "name{k=v,...} count=N sum=S" for a histogram, "name{...} value=N"
// for a counter. Metrics of other scopes (otelhttp's) are left out.
func (tel *telemetry) points(t testing.TB) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			lines = append(lines, metricLines(m)...)
		}
	}
	sort.Strings(lines)
	return lines
}

// checkPoints fails t unless the metrics recorded are want, in points's
// form.
func (tel *telemetry) checkPoints(t testing.TB, want []string) {
	t.Helper()
	if diff := cmp.Diff(want, tel.points(t)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func metricLines(m metricdata.Metrics) []string {
	var lines []string
	switch d := m.Data.(type) {
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s%s count=%d sum=%d", m.Name, attrs(p.Attributes), p.Count, p.Sum))
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s%s count=%d sum=%g", m.Name, attrs(p.Attributes), p.Count, p.Sum))
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s%s value=%d", m.Name, attrs(p.Attributes), p.Value))
		}
	default:
		lines = append(lines, fmt.Sprintf("%s: unexpected data %T", m.Name, m.Data))
	}
	return lines
}

// attrs renders an attribute set as {k=v,...}, keys sorted.
func attrs(s attribute.Set) string {
	var kv []string
	for it := s.Iter(); it.Next(); {
		a := it.Attribute()
		kv = append(kv, string(a.Key)+"="+a.Value.String())
	}
	slices.Sort(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ok is an in-memory base RoundTripper that answers 200 with no body.
var ok = roundTripFunc(func(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: r}, nil
})

// logTelemetry logs every span and metric point recorded, otelhttp's
// included, as text: `go test -v -run TestTransportSpanPerAttemptAndMetrics`
// prints what docs/observability.md shows.
func (tel *telemetry) logTelemetry(t testing.TB) {
	t.Helper()
	for _, s := range tel.spans.Ended() {
		var kv []string
		for _, a := range s.Attributes() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		t.Logf("span %q kind=%s span=%s parent=%s", s.Name(), s.SpanKind(), s.SpanContext().SpanID(), s.Parent().SpanID())
		if len(kv) > 0 {
			t.Logf("    attributes: %s", strings.Join(kv, " "))
		}
		for _, e := range s.Events() {
			t.Logf("    event %s", e.Name+attrs(attribute.NewSet(e.Attributes...)))
		}
	}
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, line := range metricLines(m) {
				t.Logf("metric %s (unit %s, scope %s)", line, m.Unit, sm.Scope.Name)
			}
		}
	}
}
