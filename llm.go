package retry

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
)

// LLMRetryable is a Policy.Retryable for LLM APIs such as OpenAI's and
// Anthropic's. It retries what [IsRetryable] retries (Anthropic's 529
// Overloaded is a 5xx), except a 429 whose error body says the account's
// quota is used up (insufficient_quota): that one will not pass by waiting,
// so retrying it only burns the caller's time.
//
// It also judges the errors that an event stream reports after its 200: a
// [*StreamError] from a Transport with a [Stream], and the SDKs' own errors
// for an error event (anthropic-sdk-go's *anthropic.Error with the stream's
// 2xx status, openai-go's *ssestream.StreamError), by the status their
// error type stands for: overloaded_error, rate_limit_error,
// rate_limit_exceeded, api_error and server_error are retried;
// invalid_request_error and a used-up quota are not.
//
// With it, the Transport peeks at most 4 KiB of an error body into
// [StatusError.Body]; the response handed back still carries its whole body,
// unread.
func LLMRetryable(err error) bool {
	if se, ok := errors.AsType[*StatusError](err); ok {
		return !(se.StatusCode == http.StatusTooManyRequests && quotaExhausted(se.Body)) && IsRetryable(err)
	}
	if retry, ok := streamRetryable(err); ok {
		return retry
	}
	return IsRetryable(err)
}

// quotaExhausted reports an error body naming a used-up quota, as OpenAI
// sends it: {"error": {"type": "insufficient_quota", "code": "insufficient_quota", ...}}.
func quotaExhausted(body []byte) bool {
	return bytes.Contains(body, []byte("insufficient_quota"))
}

// NewIdempotencyKey returns a random version 4 UUID (RFC 9562), such as
// "f47ac10b-58cc-4372-a567-0e02b2c3d479", read from crypto/rand. It suits
// Transport.IdempotencyKey and any API that deduplicates requests by key.
func NewIdempotencyKey() string {
	var u [16]byte
	_, _ = rand.Read(u[:])  // never fails: crypto/rand.Read crashes the program instead
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], u[10:16])
	return string(s[:])
}
