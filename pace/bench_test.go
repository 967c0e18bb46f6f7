package pace

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// The Pacer's costs: a wait for a key with nothing learned (the common
// case, and the price every request pays for setting retry.Transport.Pacer), and
// learning from one response: reading its headers and moving the buckets.

func BenchmarkPacerWaitNothingKnown(b *testing.B) {
	var p Pacer
	benchReserve(b, &p)
}

func BenchmarkPacerWaitUnknownKey(b *testing.B) {
	var p Pacer
	known, _ := http.NewRequest(http.MethodPost, "https://other.example.com/v1/x", nil)
	p.add(known, 0).requests.learn(&limitObs{kind: kindBucket, limit: 10, reset: time.Second}, snapshot{}, at(0))
	benchReserve(b, &p)
}

// benchReserve times what a Transport's attempt costs p, Reserve and
// Done without a response (the error path, which learns nothing), for a
// request whose key p has not learned, with each API's credential header:
// OpenAI's, Anthropic's, Azure's.
func benchReserve(b *testing.B, p *Pacer) {
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		b.Run(h, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/x", nil)
			req.Header.Set(h, "sk-test")
			b.ReportAllocs()
			for b.Loop() {
				r, _ := p.Reserve(req, 1, nil, time.Hour)
				r.Done(req, nil, errBench, nil, 0, 0)
			}
		})
	}
}

// errBench is the error of an attempt that got no response.
var errBench = errors.New("no response")

// benchFormats returns a response's headers in each format, as the
// servers send them.
func benchFormats() map[string]http.Header {
	return map[string]http.Header{
		"openai": hdr("x-ratelimit-limit-requests", "10000", "x-ratelimit-limit-tokens", "2000000",
			"x-ratelimit-remaining-requests", "9999", "x-ratelimit-remaining-tokens", "1999000",
			"x-ratelimit-reset-requests", "6ms", "x-ratelimit-reset-tokens", "30ms"),
		"anthropic": hdr("Date", "Thu, 01 Jan 2026 00:00:00 GMT",
			"anthropic-ratelimit-requests-limit", "4000", "anthropic-ratelimit-requests-remaining", "3999",
			"anthropic-ratelimit-requests-reset", "2026-01-01T00:00:01Z",
			"anthropic-ratelimit-tokens-limit", "400000", "anthropic-ratelimit-tokens-remaining", "399000",
			"anthropic-ratelimit-tokens-reset", "2026-01-01T00:00:01Z"),
		"github": hdr("Date", "Thu, 01 Jan 2026 00:00:00 GMT", "x-ratelimit-limit", "5000",
			"x-ratelimit-remaining", "4999", "x-ratelimit-reset", strconv.FormatInt(pacerEpoch.Unix()+3600, 10),
			"x-ratelimit-resource", "core"),
		"ietf": hdr("RateLimit-Policy", `"rpm";q=600;w=60, "tpm";q=1000000;qu="tokens";w=60`,
			"RateLimit", `"rpm";r=599;t=1, "tpm";r=999000;t=1`),
	}
}

func BenchmarkPacerObserve(b *testing.B) {
	for name, h := range benchFormats() {
		b.Run(name, func(b *testing.B) {
			p := Pacer{Cost: func(*http.Request) int64 { return 1000 }}
			req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/x", nil)
			resp := &http.Response{StatusCode: 200, Header: h}
			var pol retry.Policy
			var t paceTicket
			p.observe(&t, req, resp, nil, pol.Clock, 0, time.Hour) // the key exists from here on
			var sent paceTicket
			p.reserve(&sent, req, nil, time.Hour) // a ticket as a request holds it when its response comes
			b.ReportAllocs()
			for b.Loop() {
				t = sent
				p.observe(&t, req, resp, nil, pol.Clock, 0, time.Hour)
			}
		})
	}
}

// BenchmarkPacerParse times reading the headers alone, which is most of
// BenchmarkPacerObserve.
func BenchmarkPacerParse(b *testing.B) {
	for name, h := range benchFormats() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseRateHeaders(h, pacerEpoch, nil)
			}
		})
	}
}
