package retryotel

import (
	"github.com/retrykit/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The span events written on the caller's span, and their attributes.
const (
	eventRetry  = "retry"
	eventHedge  = "retry.hedge"
	eventGiveUp = "retry.give_up"

	keyAttempt        = attribute.Key("retry.attempt")
	keyAttempts       = attribute.Key("retry.attempts")
	keyDelay          = attribute.Key("retry.delay")
	keyFromRetryAfter = attribute.Key("retry.from_retry_after")
)

// retryEvent adds a "retry" event to the caller's span: which attempt
// failed, why, and how long the call sleeps before the next; or, for a
// hedge, a "retry.hedge" event: the attempt about to be sent, the wait
// since the last, and the failure that sent it at once, if one did. The attempt's
// own span has ended by then, and the sleep belongs to the call, not to
// either attempt, so the caller's span is the one that can tell it.
func retryEvent(ev retry.Event) {
	if ev.Context == nil {
		return
	}
	span := trace.SpanFromContext(ev.Context)
	if !span.IsRecording() {
		return
	}
	if ev.Hedge { // a hedge: the attempt about to go, after what wait, and the failure that sent it at once
		kv := [3]attribute.KeyValue{keyAttempt.Int(ev.Attempt + 1), keyDelay.Float64(ev.Delay.Seconds())}
		n := 2
		if ev.Err != nil {
			kv[2], n = keyErrorType.String(errorType(ev.Err)), 3
		}
		span.AddEvent(eventHedge, trace.WithAttributes(kv[:n]...))
		return
	}
	kv := [4]attribute.KeyValue{
		keyAttempt.Int(ev.Attempt),
		keyDelay.Float64(ev.Delay.Seconds()),
		keyFromRetryAfter.Bool(ev.FromRetryAfter),
		keyErrorType.String(errorType(ev.Err)),
	}
	span.AddEvent(eventRetry, trace.WithAttributes(kv[:]...))
}

// giveUpEvent adds a "retry.give_up" event to the caller's span when the
// call stopped retrying without success.
func giveUpEvent(o retry.Outcome) {
	if o.Reason == "" || o.Context == nil {
		return
	}
	span := trace.SpanFromContext(o.Context)
	if !span.IsRecording() {
		return
	}
	var buf [3]attribute.KeyValue
	kv := append(buf[:0], keyReason.String(string(o.Reason)), keyAttempts.Int(o.Attempts))
	if err := outcomeErr(o); err != nil {
		kv = append(kv, keyErrorType.String(errorType(err)))
	}
	span.AddEvent(eventGiveUp, trace.WithAttributes(kv...))
}
