// Package retryotel reports what the retry layer of
// [github.com/retrykit/retry] does to OpenTelemetry: a span per attempt,
// events for each retry, and metrics of retries, sleeps, give-ups, budget
// refusals and pacer waits.
//
// For HTTP, [NewTransport] builds the whole composition:
//
//	client := &http.Client{Transport: retryotel.NewTransport(nil, retry.Policy{}, retryotel.Config{})}
//
// It is the same as
//
//	p = retryotel.Instrument(p, cfg)
//	t := retry.NewTransport(otelhttp.NewTransport(retryotel.ResendCount(base)), p)
//
// otelhttp inside the retry layer makes one CLIENT span per attempt, as the
// HTTP semantic conventions ask; [ResendCount] inside otelhttp sets
// http.request.resend_count on the spans of the second and later attempts.
// For [retry.Do], [Instrument] alone reports the retries and the call.
//
// # Span events
//
// On the caller's span (the span in the context the call was made with),
// each retry adds an event "retry" with retry.attempt (the attempt that
// failed), retry.delay (the sleep before the next, in seconds),
// retry.from_retry_after (whether the server's hint set it) and error.type;
// a call that gives up adds "retry.give_up" with retry.reason,
// retry.attempts and, when the call failed, error.type: its error, or the
// retryable status it gave up on.
//
// # Metrics
//
// Recorded once per call, when it ends, on the meter named [ScopeName]:
//
//	retry.client.call.retries          histogram {retry}  retries made (attempts - 1 - hedges)
//	retry.client.call.retry_delay      histogram s        time slept between attempts
//	retry.client.call.give_ups         counter   {call}   calls that gave up, by retry.reason
//	retry.client.call.budget_refusals  counter   {call}   calls whose retry the Budget refused
//	retry.client.call.pacer_wait       histogram s        time waited for the Pacer, calls that waited
//	retry.client.call.hedges           counter   {hedge}  hedges sent (Policy.Hedge); not retries
//
// Their attributes are server.address and http.request.method for a
// Transport's call, and error.type when the call failed, as above; nothing
// of high cardinality. docs/observability.md in the repository is the full
// guide.
//
// With a no-op MeterProvider and no recording span, the hooks cost a few
// interface calls per call and allocate nothing.
package retryotel
