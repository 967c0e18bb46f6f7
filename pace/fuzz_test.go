package pace

import (
	"math"
	"net/http"
	"testing"

	"github.com/retrykit/retry/internal/wire"
)

// checkObs fails t when a parser passed on a value that cannot be true,
// and drives a bucket with it: no observation may make a wait negative or
// NaN, nor panic.
func checkObs(t *testing.T, o rateObs) {
	t.Helper()
	for _, d := range []limitObs{o.requests, o.tokens} {
		if d.kind == kindNone {
			continue
		}
		if !(d.limit > 0) || d.remaining < 0 || d.remaining > d.limit || d.reset < 0 || d.reset > wire.MaxReset {
			t.Fatalf("parser passed an impossible observation: %+v", d)
		}
		var b bucket
		now := pacerEpoch.UnixNano()
		b.learn(&d, snapshot{}, now)
		for i := range 3 {
			w, _ := b.take(d.limit/2+1, now)
			s := b.send(d.limit/2+1, now+int64(w))
			if w < 0 || math.IsNaN(s.level) {
				t.Fatalf("take %d after %+v: wait %v, snapshot %+v", i, d, w, s)
			}
			b.learn(&d, s, now+int64(w))
		}
	}
}

func FuzzParseOpenAI(f *testing.F) {
	f.Add("60", "59", "1s", "150000", "149984", "6m0s")
	f.Add("10000", "9999", "12ms", "2000000", "1000000", "1m30.5s")
	f.Add("100", "99", "60", "1", "0", "0.5")
	f.Add("0", "-1", "87600h", "NaN", "1e9", "-1s")
	f.Fuzz(func(t *testing.T, lr, rr, sr, lt, rt, st string) {
		h := http.Header{
			"X-Ratelimit-Limit-Requests": {lr}, "X-Ratelimit-Remaining-Requests": {rr}, "X-Ratelimit-Reset-Requests": {sr},
			"X-Ratelimit-Limit-Tokens": {lt}, "X-Ratelimit-Remaining-Tokens": {rt}, "X-Ratelimit-Reset-Tokens": {st},
		}
		checkObs(t, parseOpenAI(h))
		checkObs(t, parseRateHeaders(h, pacerEpoch, nil))
	})
}

func FuzzParseAnthropic(f *testing.F) {
	f.Add("Thu, 01 Jan 2026 00:00:00 GMT", "50", "49", "2026-01-01T00:00:02Z", "80000", "0", "2026-01-01T00:01:00.5Z")
	f.Add("", "50", "50", "2025-12-31T23:59:00Z", "1", "2", "2036-01-01T00:00:00Z")
	f.Add("garbage", "-1", "x", "9999-12-31T23:59:59Z", "0", "0", "0001-01-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, date, lr, rr, sr, lt, rt, st string) {
		h := http.Header{
			"Date":                               {date},
			"Anthropic-Ratelimit-Requests-Limit": {lr}, "Anthropic-Ratelimit-Requests-Remaining": {rr},
			"Anthropic-Ratelimit-Requests-Reset": {sr},
			"Anthropic-Ratelimit-Tokens-Limit":   {lt}, "Anthropic-Ratelimit-Tokens-Remaining": {rt},
			"Anthropic-Ratelimit-Tokens-Reset": {st},
		}
		checkObs(t, parseAnthropic(h, pacerEpoch))
		checkObs(t, parseRateHeaders(h, pacerEpoch, nil))
	})
}

func FuzzParseGitHub(f *testing.F) {
	f.Add("Thu, 01 Jan 2026 00:00:00 GMT", "5000", "4987", "1767227400", "core")
	f.Add("", "30", "0", "99999999999999999999", "search")
	f.Add("x", "0", "-1", "-5", "")
	f.Fuzz(func(t *testing.T, date, l, r, reset, resource string) {
		h := http.Header{"Date": {date}, "X-Ratelimit-Limit": {l}, "X-Ratelimit-Remaining": {r},
			"X-Ratelimit-Reset": {reset}, "X-Ratelimit-Resource": {resource}}
		o := parseGitHub(h, pacerEpoch)
		if len(o.resource) > 64 {
			t.Fatalf("resource of %d bytes kept", len(o.resource))
		}
		checkObs(t, o)
		checkObs(t, parseRateHeaders(h, pacerEpoch, nil))
	})
}

// fuzzMemo is the memo FuzzParseIETF shares between its inputs.
var fuzzMemo policyMemo

func FuzzParseIETF(f *testing.F) {
	f.Add(`"default";q=100;w=10`, `"default";r=50;t=5`, "100, 100;w=60", "40", "20")
	f.Add(`"rpm";q=600;w=60;pk=:cGsx:, "tpm";q=1000000;qu="tokens";w=60`, `"rpm";r=10;t=59, "tpm";r=5000;t=60`, "", "", "")
	f.Add(`;;,,"x";q=-1;w=0`, `"x";r=;t=abc, "`, "0", "-1", "315360000")
	f.Add(`"a\",b";q=1;w=1`, `"a\",b";r=1;t=1`, `"x";w=1`, "1", "1")
	f.Fuzz(func(t *testing.T, policy, limit, legacyLimit, legacyRemaining, legacyReset string) {
		h := http.Header{"Ratelimit-Policy": {policy}, "Ratelimit": {limit}, "Ratelimit-Limit": {legacyLimit},
			"Ratelimit-Remaining": {legacyRemaining}, "Ratelimit-Reset": {legacyReset}}
		o := parseIETF(h, nil)
		checkObs(t, o)
		// The memo, shared by every input, must read each as afresh.
		if m := parseIETF(h, &fuzzMemo); m != o {
			t.Fatalf("parseIETF with a memo = %+v, without = %+v", m, o)
		}
		checkObs(t, parseIETFLegacy(h, nil))
		checkObs(t, parseRateHeaders(h, pacerEpoch, nil))
	})
}
