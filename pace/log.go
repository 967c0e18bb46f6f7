package pace

import (
	"context"
	"log/slog"
	"time"
)

// DefaultLogWaitsMin is the shortest Pacer wait that LogWaits logs when
// given a minimum of zero: shorter waits are the Pacer's everyday spacing.
const DefaultLogWaitsMin = time.Second

// LogWaits returns a Pacer.OnWait that logs each wait of at least threshold
// (zero: DefaultLogWaitsMin) to logger (nil: slog.Default()) at level Info,
// with the host, the attempt about to begin, the wait, and whether a
// Retry-After set it, or whether it is a wait for a slot under the key's
// concurrency limit (its delay then an estimate). Pacing waits are not retries, so LogRetries never
// sees them; a long one is worth a line, since it is time the caller
// spends before anything is sent. It never logs request headers.
func LogWaits(logger *slog.Logger, threshold time.Duration) func(Event) {
	if logger == nil {
		logger = slog.Default()
	}
	if threshold <= 0 {
		threshold = DefaultLogWaitsMin
	}
	return func(e Event) {
		if e.Delay < threshold {
			return
		}
		if e.Slot { // a wait for a slot under the key's concurrency limit; its delay is an estimate
			logger.LogAttrs(context.Background(), slog.LevelInfo, "pacing",
				slog.String("host", e.Host),
				slog.Int("attempt", e.Attempt),
				slog.Duration("delay", e.Delay),
				slog.Bool("slot", true))
			return
		}
		logger.LogAttrs(context.Background(), slog.LevelInfo, "pacing",
			slog.String("host", e.Host),
			slog.Int("attempt", e.Attempt),
			slog.Duration("delay", e.Delay),
			slog.Bool("retry_after", e.RetryAfter))
	}
}
