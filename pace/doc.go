// Package pace spaces requests by the rate limits that servers announce, so
// that callers who share an API key wait their turn instead of being
// refused: a [Pacer] in a retry.Transport (package
// github.com/retrykit/retry) waits before every attempt, first attempts and
// retries alike, until the Pacer grants it, and after every response,
// whatever its status, reads the response's rate-limit headers:
// OpenAI's x-ratelimit-*-requests and -tokens, Anthropic's
// anthropic-ratelimit-*, GitHub's x-ratelimit-* (which many limiters send
// too), and the IETF RateLimit-Policy and RateLimit fields of every draft
// (or the older RateLimit-Limit, -Remaining and -Reset). A Retry-After on a
// 429, 503 or 529, or on a 403 (GitHub's secondary limit), holds every
// caller of that key until it passes, not only the caller refused.
//
//	pacer := &pace.Pacer{} // one per API key
//	client := &http.Client{Transport: &retry.Transport{Pacer: pacer}}
//
// The model. Per key, each dimension the server reports (requests, and
// tokens when Pacer.Cost is set) is a bucket: a token bucket refilling
// continuously for OpenAI and Anthropic, at (limit - remaining) / reset; a
// fixed window for the IETF fields (whose length is their w), GitHub's and
// the other x-ratelimit-* headers, whose remaining count lasts until the
// reset and then the whole limit returns. Each caller reserves its request
// (and its Cost) from the buckets and waits, if they are empty, for its
// turn: callers are served first come, first served. Each response moves a
// bucket down to what the server reports, allowing for the requests still
// in flight and for a server that counts requests sent together in another
// order, and never up past it. A key with nothing learned is not paced,
// and costs next to nothing.
//
// Overload. A server that is full answers 529 or 503 (Pacer.Overloaded
// says which), or an overloaded_error event at the start of a stream, and
// announces nothing. From the first such answer on, a key has a limit on
// the requests in flight, learned from those answers (see limit.go for the
// rules), and a request beyond it waits for a slot, first come, first
// served, as it waits for a bucket; a server that states the limit (the
// IETF quota unit concurrent-requests) sets it. A key never overloaded has
// no limit, and pays nothing for it.
//
// Values that cannot be true are ignored, not believed: a reset or a
// Retry-After more than a day away, a limit of 0, a remaining count above
// the limit, a negative or unparseable number. A response without
// rate-limit headers changes nothing. A wait that cannot end before the
// call's Deadline (or its context's deadline) fails the call at once.
//
// A [Store] shares the buckets of a fleet's Pacers (package
// github.com/retrykit/retry/retryredis keeps them in Redis). The guide is
// docs/pacing.md in the repository.
package pace
