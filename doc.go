// Package retry makes calls to unreliable remote services succeed when they
// can and fail fast when they can't.
//
// It has two entry points over one retry loop. [Transport] is a
// [net/http.RoundTripper] middleware: put it in a [net/http.Client], or hand
// such a client to an SDK that accepts one, and every request is retried by
// the rules below. [Do] runs the same loop around any call, such as a gRPC
// method, a database query, or a whole streamed LLM answer read inside one
// attempt.
//
// The loop, configured by a [Policy]:
//
//   - runs each attempt under a timeout, never past the call's Deadline;
//   - retries only failures that may pass on a second try ([IsRetryable]):
//     timeouts, dropped connections, 408, 429 and most 5xx statuses;
//   - waits between attempts with capped exponential backoff and full
//     jitter ([Backoff]), and never less than the server's Retry-After
//     hint ([ParseRetryAfter]);
//   - never sleeps after the final attempt, nor when the next attempt could
//     not start before the deadline;
//   - stops at once when the caller's context is done.
//
// The Transport adds the rules HTTP needs: only requests that may run twice
// are sent twice (idempotent methods, an Idempotency-Key, or a failure that
// proves the server did not process the request), bodies are rewound through
// GetBody, discarded responses are drained and closed so connections are
// reused, and the attempt timeout ends when the response headers arrive.
//
// The companion package [github.com/retrykit/retry/retrytest] tests code
// that retries without waiting: a server that fails on a script of
// statuses, hangs and dropped connections, fake time for the Policy's
// Clock, Sleep and Rand, and an in-memory server for tests inside a
// [testing/synctest] bubble, where even attempt timeouts take no real time.
package retry
