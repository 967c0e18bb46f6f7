package retryotel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
	"github.com/retrykit/retry/retrytest"
)

// flaky starts a server that answers 503 to the first n requests, then 200,
// and prints whether each request carried a traceparent header.
func flaky(n int32) *httptest.Server {
	var calls atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("server: request %d, traceparent set: %t\n", calls.Load()+1, r.Header.Get("traceparent") != "")
		if calls.Add(1) <= n {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
}

// printSpans prints the attempt spans: name, kind and resend count.
func printSpans(sr *tracetest.SpanRecorder) {
	for _, s := range sr.Ended() {
		resend := "-"
		for _, a := range s.Attributes() {
			if a.Key == "http.request.resend_count" {
				resend = a.Value.String()
			}
		}
		fmt.Printf("span %q %s resend_count=%s\n", s.Name(), s.SpanKind(), resend)
	}
}

func ExampleNewTransport() {
	srv := flaky(2)
	defer srv.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ft := retrytest.NewFakeTime() // a Policy in production needs none of this
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}

	client := &http.Client{Transport: retryotel.NewTransport(nil, p, retryotel.Config{
		TracerProvider: tp,
		Propagators:    propagation.TraceContext{},
	})}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	fmt.Println("status:", resp.StatusCode)
	printSpans(spans)
	// Output:
	// server: request 1, traceparent set: true
	// server: request 2, traceparent set: true
	// server: request 3, traceparent set: true
	// status: 200
	// span "HTTP GET" client resend_count=-
	// span "HTTP GET" client resend_count=1
	// span "HTTP GET" client resend_count=2
}

func ExampleResendCount() {
	srv := flaky(1)
	defer srv.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ft := retrytest.NewFakeTime()
	p := retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand}

	// The order NewTransport builds: ResendCount inside otelhttp, otelhttp
	// inside the retry layer.
	attempts := otelhttp.NewTransport(retryotel.ResendCount(http.DefaultTransport),
		otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	client := &http.Client{Transport: retry.NewTransport(attempts, retryotel.Instrument(p, retryotel.Config{}))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	printSpans(spans)
	// Output:
	// server: request 1, traceparent set: true
	// server: request 2, traceparent set: true
	// span "HTTP GET" client resend_count=-
	// span "HTTP GET" client resend_count=1
}

func ExampleInstrument() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ft := retrytest.NewFakeTime()
	p := retryotel.Instrument(retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
		retryotel.Config{MeterProvider: mp})

	// A call that fails twice with a retryable status, then succeeds.
	calls := 0
	v, err := retry.Do(context.Background(), p, func(context.Context) (string, error) {
		if calls++; calls < 3 {
			return "", &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
		}
		return "done", nil
	})
	fmt.Println(v, err)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Histogram[int64]:
			fmt.Printf("%s [%s]: calls=%d sum=%d\n", m.Name, m.Unit, d.DataPoints[0].Count, d.DataPoints[0].Sum)
		case metricdata.Histogram[float64]:
			fmt.Printf("%s [%s]: calls=%d sum=%g\n", m.Name, m.Unit, d.DataPoints[0].Count, d.DataPoints[0].Sum)
		}
	}
	// Output:
	// done <nil>
	// retry.client.call.retries [{retry}]: calls=1 sum=2
	// retry.client.call.retry_delay [s]: calls=1 sum=1.5
}
