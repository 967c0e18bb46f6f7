package pace

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// hdr builds a header from name, value pairs, canonicalizing the names as
// net/http does for a received response.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

var obsCmp = cmp.AllowUnexported(rateObs{}, limitObs{})

// pacerEpoch is the instant the parser tests read headers at.
var pacerEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestParseOpenAI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    http.Header
		want rateObs
	}{
		{
			name: "documented sample", // from OpenAI's rate-limit guide
			h: hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
			want: rateObs{
				requests: limitObs{kind: kindBucket, limit: 60, remaining: 59, reset: time.Second},
				tokens:   limitObs{kind: kindBucket, limit: 150000, remaining: 149984, reset: 6 * time.Minute},
			},
		},
		{
			name: "milliseconds and fractions",
			h: hdr("x-ratelimit-limit-requests", "10000", "x-ratelimit-remaining-requests", "9999",
				"x-ratelimit-reset-requests", "12ms", "x-ratelimit-limit-tokens", "2000000",
				"x-ratelimit-remaining-tokens", "1000000", "x-ratelimit-reset-tokens", "1m30.5s"),
			want: rateObs{
				requests: limitObs{kind: kindBucket, limit: 10000, remaining: 9999, reset: 12 * time.Millisecond},
				tokens:   limitObs{kind: kindBucket, limit: 2e6, remaining: 1e6, reset: 90500 * time.Millisecond},
			},
		},
		{
			name: "azure plain seconds",
			h: hdr("x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "99",
				"x-ratelimit-reset-requests", "60"),
			want: rateObs{requests: limitObs{kind: kindBucket, limit: 100, remaining: 99, reset: time.Minute}},
		},
		{
			name: "reset in ten years ignored",
			h: hdr("x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "99",
				"x-ratelimit-reset-requests", "87600h"),
		},
		{
			name: "limit zero ignored",
			h: hdr("x-ratelimit-limit-requests", "0", "x-ratelimit-remaining-requests", "0",
				"x-ratelimit-reset-requests", "1s"),
		},
		{
			name: "negative remaining ignored",
			h: hdr("x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "-1",
				"x-ratelimit-reset-requests", "1s"),
		},
		{
			name: "negative reset ignored",
			h: hdr("x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "1",
				"x-ratelimit-reset-requests", "-1s"),
		},
		{
			name: "remaining above limit ignored",
			h: hdr("x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "101",
				"x-ratelimit-reset-requests", "1s"),
		},
		{
			name: "garbage ignored",
			h: hdr("x-ratelimit-limit-requests", "lots", "x-ratelimit-remaining-requests", "NaN",
				"x-ratelimit-reset-requests", "soon"),
		},
		{
			name: "partial headers ignored",
			h:    hdr("x-ratelimit-limit-requests", "100", "x-ratelimit-remaining-requests", "99"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, parseOpenAI(tt.h), obsCmp); diff != "" {
				t.Errorf("parseOpenAI (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAnthropic(t *testing.T) {
	t.Parallel()
	date := "Thu, 01 Jan 2026 00:00:00 GMT"
	tests := []struct {
		name string
		h    http.Header
		now  time.Time
		want rateObs
	}{
		{
			name: "documented sample, skewed local clock",
			h: hdr("Date", date,
				"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
				"anthropic-ratelimit-requests-reset", "2026-01-01T00:00:02Z",
				"anthropic-ratelimit-tokens-limit", "80000", "anthropic-ratelimit-tokens-remaining", "72000",
				"anthropic-ratelimit-tokens-reset", "2026-01-01T00:00:06Z",
				"anthropic-ratelimit-input-tokens-limit", "40000", "anthropic-ratelimit-input-tokens-remaining", "39000",
				"anthropic-ratelimit-input-tokens-reset", "2026-01-01T00:00:01Z"),
			now: pacerEpoch.Add(time.Hour), // the Date header wins over our clock
			want: rateObs{
				requests: limitObs{kind: kindBucket, limit: 50, remaining: 49, reset: 2 * time.Second, slack: time.Second},
				tokens:   limitObs{kind: kindBucket, limit: 80000, remaining: 72000, reset: 6 * time.Second, slack: time.Second},
			},
		},
		{
			name: "input tokens when no combined limit",
			h: hdr("Date", date,
				"anthropic-ratelimit-input-tokens-limit", "40000", "anthropic-ratelimit-input-tokens-remaining", "39000",
				"anthropic-ratelimit-input-tokens-reset", "2026-01-01T00:00:01.5Z"),
			now: pacerEpoch,
			want: rateObs{
				tokens: limitObs{kind: kindBucket, limit: 40000, remaining: 39000, reset: 1500 * time.Millisecond},
			},
		},
		{
			name: "no Date: relative to now, reset past means full now",
			h: hdr("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "50",
				"anthropic-ratelimit-requests-reset", "2025-12-31T23:59:00Z"),
			now:  pacerEpoch,
			want: rateObs{requests: limitObs{kind: kindBucket, limit: 50, remaining: 50, slack: time.Second}},
		},
		{
			name: "reset in ten years ignored",
			h: hdr("Date", date, "anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "1",
				"anthropic-ratelimit-requests-reset", "2036-01-01T00:00:00Z"),
			now: pacerEpoch,
		},
		{
			name: "reset on the 31st",
			h: hdr("Date", "Sat, 31 Jan 2026 00:00:00 GMT", "anthropic-ratelimit-requests-limit", "50",
				"anthropic-ratelimit-requests-remaining", "1", "anthropic-ratelimit-requests-reset", "2026-01-31T00:00:02Z"),
			now:  pacerEpoch,
			want: rateObs{requests: limitObs{kind: kindBucket, limit: 50, remaining: 1, reset: 2 * time.Second, slack: time.Second}},
		},
		{
			name: "reset on a day that does not exist ignored",
			h: hdr("Date", "Sat, 28 Feb 2026 23:59:59 GMT", "anthropic-ratelimit-requests-limit", "50",
				"anthropic-ratelimit-requests-remaining", "1", "anthropic-ratelimit-requests-reset", "2026-02-29T00:00:01Z"),
			now: pacerEpoch,
		},
		{
			name: "garbage reset ignored",
			h: hdr("Date", date, "anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "1",
				"anthropic-ratelimit-requests-reset", "tomorrow"),
			now: pacerEpoch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, parseAnthropic(tt.h, tt.now), obsCmp); diff != "" {
				t.Errorf("parseAnthropic (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseGitHub(t *testing.T) {
	t.Parallel()
	reset := pacerEpoch.Add(30 * time.Minute).Unix()
	tests := []struct {
		name string
		h    http.Header
		want rateObs
	}{
		{
			name: "documented sample",
			h: hdr("Date", "Thu, 01 Jan 2026 00:00:00 GMT", "x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4987",
				"x-ratelimit-used", "13", "x-ratelimit-reset", itoa(reset), "x-ratelimit-resource", "core"),
			want: rateObs{
				requests: limitObs{kind: kindWindow, limit: 5000, remaining: 4987, reset: 30 * time.Minute, slack: time.Second, end: reset},
				resource: "core",
			},
		},
		{
			name: "no Date: relative to now",
			h:    hdr("x-ratelimit-limit", "30", "x-ratelimit-remaining", "0", "x-ratelimit-reset", itoa(reset)),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 30, reset: 30 * time.Minute, slack: time.Second, end: reset}},
		},
		{
			// @fastify/rate-limit's default and Reddit's: seconds from now.
			name: "reset in seconds from now",
			h: hdr("Date", "Thu, 01 Jan 2026 00:00:00 GMT", "x-ratelimit-limit", "50", "x-ratelimit-remaining", "41",
				"x-ratelimit-reset", "10"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 41, reset: 10 * time.Second, slack: time.Second}},
		},
		{
			name: "reset of a day is still seconds from now",
			h:    hdr("x-ratelimit-limit", "50", "x-ratelimit-remaining", "41", "x-ratelimit-reset", "86400"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 41, reset: 24 * time.Hour, slack: time.Second}},
		},
		{
			name: "just over a day: a Unix time, long past, so the window has ended",
			h:    hdr("x-ratelimit-limit", "50", "x-ratelimit-remaining", "0", "x-ratelimit-reset", "86401"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 0, reset: 0, slack: time.Second, end: 86401}},
		},
		{
			// express-rate-limit's legacy headers: the Unix time, read
			// against Date, not against the reader's clock.
			name: "Unix time against Date",
			h: hdr("Date", pacerEpoch.Add(-2*time.Second).UTC().Format(http.TimeFormat), "x-ratelimit-limit", "50",
				"x-ratelimit-remaining", "41", "x-ratelimit-reset", itoa(pacerEpoch.Add(8*time.Second).Unix())),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 41, reset: 10 * time.Second, slack: time.Second,
				end: pacerEpoch.Add(8 * time.Second).Unix()}},
		},
		{
			name: "reset in ten years ignored",
			h: hdr("x-ratelimit-limit", "30", "x-ratelimit-remaining", "0",
				"x-ratelimit-reset", itoa(pacerEpoch.AddDate(10, 0, 0).Unix())),
		},
		{
			name: "huge reset ignored",
			h:    hdr("x-ratelimit-limit", "30", "x-ratelimit-remaining", "0", "x-ratelimit-reset", "99999999999999999999"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, parseGitHub(tt.h, pacerEpoch), obsCmp); diff != "" {
				t.Errorf("parseGitHub (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseIETF(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    http.Header
		want rateObs
	}{
		{
			name: "draft sample",
			h:    hdr("RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=50;t=5`),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 100, remaining: 50, reset: 5 * time.Second, slack: time.Second, window: 10 * time.Second}},
		},
		{
			name: "two policies, tokens, partition keys, split lines",
			h: hdr("RateLimit-Policy", `"rpm";q=600;w=60;pk=:cGsx:`, "RateLimit-Policy", `"tpm";q=1000000;qu="tokens";w=60`,
				"RateLimit", `"rpm";r=10;t=59;pk=:cGsx:, "tpm";r=5000;t=60`),
			want: rateObs{
				requests: limitObs{kind: kindWindow, limit: 600, remaining: 10, reset: 59 * time.Second, slack: time.Second, window: time.Minute},
				tokens:   limitObs{kind: kindWindow, limit: 1e6, remaining: 5000, reset: time.Minute, slack: time.Second, window: time.Minute},
			},
		},
		{
			name: "least available policy binds",
			h: hdr("RateLimit-Policy", `"burst";q=100;w=60, "day";q=1000;w=86400`,
				"RateLimit", `"burst";r=90;t=30, "day";r=5;t=3600`),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 1000, remaining: 5, reset: time.Hour, slack: time.Second, window: 24 * time.Hour}},
		},
		{
			name: "concurrent requests set the limit",
			h: hdr("RateLimit-Policy", `"rpm";q=600;w=60, "conc";q=8;qu="concurrent-requests"`,
				"RateLimit", `"rpm";r=10;t=59, "conc";r=3`),
			want: rateObs{
				requests:   limitObs{kind: kindWindow, limit: 600, remaining: 10, reset: 59 * time.Second, slack: time.Second, window: time.Minute},
				concurrent: 8,
			},
		},
		{
			name: "the least concurrent-requests quota binds",
			h:    hdr("RateLimit-Policy", `"a";q=8;qu="concurrent-requests", "b";q=4;qu="concurrent-requests"`, "RateLimit", `"a";r=1, "b";r=1`),
			want: rateObs{concurrent: 4},
		},
		{
			name: "a concurrent-requests policy the RateLimit field does not name sets nothing",
			h:    hdr("RateLimit-Policy", `"conc";q=8;qu="concurrent-requests"`, "RateLimit", `"other";r=1`),
		},
		{
			name: "unknown unit not paced",
			h:    hdr("RateLimit-Policy", `"b";q=1000;qu="content-bytes";w=1`, "RateLimit", `"b";r=0;t=1`),
		},
		{
			name: "policy without window is a fixed window",
			h:    hdr("RateLimit-Policy", `"x";q=100`, "RateLimit", `"x";r=3;t=20`),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 100, remaining: 3, reset: 20 * time.Second, slack: time.Second}},
		},
		{
			name: "garbage ignored",
			h:    hdr("RateLimit-Policy", `;;,,"x";q=-1;w=0`, "RateLimit", `"x";r=;t=abc, "`),
		},
		{
			name: "a RateLimit field that does not parse is not believed, not even its first member",
			h:    hdr("RateLimit-Policy", `"p";q=100;w=10`, "RateLimit", `"p";r=5;t=1, "q";r=`),
		},
		{
			name: "a RateLimit-Policy field that does not parse names no policy",
			h:    hdr("RateLimit-Policy", `"p";q=100;w=10,`, "RateLimit", `"p";r=5;t=1`),
		},
		{
			name: "a negative quota is no policy",
			h:    hdr("RateLimit-Policy", `"p";q=-100;w=10`, "RateLimit", `"p";r=5;t=1`),
		},
		{
			name: "draft 7 with a number that is a string: nothing",
			h:    hdr("RateLimit-Policy", "50;w=10", "RateLimit", `limit=50, remaining="49", reset=10`),
		},
		{
			name: "parameter sent twice: the last counts", // RFC 9651, section 4.2.3.2
			h:    hdr("RateLimit-Policy", `"p";q=100;w=10;q=10`, "RateLimit", `"p";r=5;t=1;r=2`),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 10, remaining: 2, reset: time.Second, slack: time.Second, window: 10 * time.Second}},
		},
		{
			name: "quota after eight other parameters",
			h: hdr("RateLimit-Policy", `"p";a=1;b=2;c=3;d=4;e=5;f=6;g=7;h=8;q=100;w=10`,
				"RateLimit", `"p";a=1;b=2;c=3;d=4;e=5;f=6;g=7;h=8;r=50;t=5`),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 100, remaining: 50, reset: 5 * time.Second, slack: time.Second, window: 10 * time.Second}},
		},
		{
			name: "legacy fields",
			h:    hdr("RateLimit-Limit", "100", "RateLimit-Remaining", "40", "RateLimit-Reset", "20"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 100, remaining: 40, reset: 20 * time.Second, slack: time.Second}},
		},
		{
			name: "legacy fields with a window",
			h:    hdr("RateLimit-Limit", "100, 100;w=60, 1000;w=3600", "RateLimit-Remaining", "40", "RateLimit-Reset", "20"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 100, remaining: 40, reset: 20 * time.Second, slack: time.Second, window: time.Minute}},
		},
		// The forms real limiters send: express-rate-limit 8.7.5 in each
		// of its standardHeaders modes, and @fastify/rate-limit 11.2.0's
		// draft mode, all for 50 per 10 s with 49 left.
		{
			name: "draft 6 (express-rate-limit): legacy fields, the window from a bare policy",
			h: hdr("RateLimit-Policy", "50;w=10", "RateLimit-Limit", "50", "RateLimit-Remaining", "49",
				"RateLimit-Reset", "10"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 49, reset: 10 * time.Second, slack: time.Second, window: 10 * time.Second}},
		},
		{
			name: "draft 7 (express-rate-limit): a dictionary, the window from a bare policy",
			h:    hdr("RateLimit-Policy", "50;w=10", "RateLimit", "limit=50, remaining=49, reset=10"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 49, reset: 10 * time.Second, slack: time.Second, window: 10 * time.Second}},
		},
		{
			name: "draft 7 without a policy: a window of unknown length",
			h:    hdr("RateLimit", "limit=50, remaining=49, reset=10"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 49, reset: 10 * time.Second, slack: time.Second}},
		},
		{
			name: "draft 7 with a member missing: nothing",
			h:    hdr("RateLimit-Policy", "50;w=10", "RateLimit", "limit=50, reset=10"),
		},
		{
			name: "draft 8 (express-rate-limit): named policy, the quota returns at t",
			h: hdr("RateLimit-Policy", `"50-in-10sec"; q=50; w=10; pk=:NzM5OGI1ZjE5YjJj:`,
				"RateLimit", `"50-in-10sec"; r=49; t=10`),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 49, reset: 10 * time.Second, slack: time.Second, window: 10 * time.Second}},
		},
		{
			name: "draft mode of @fastify/rate-limit: the legacy fields alone",
			h:    hdr("ratelimit-limit", "50", "ratelimit-remaining", "49", "ratelimit-reset", "10"),
			want: rateObs{requests: limitObs{kind: kindWindow, limit: 50, remaining: 49, reset: 10 * time.Second, slack: time.Second}},
		},
		{
			name: "legacy reset in ten years ignored",
			h:    hdr("RateLimit-Limit", "100", "RateLimit-Remaining", "40", "RateLimit-Reset", "315360000"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseIETF(tt.h, nil)
			if got.empty() {
				got = parseIETFLegacy(tt.h, nil)
			}
			if diff := cmp.Diff(tt.want, got, obsCmp); diff != "" {
				t.Errorf("parseIETF (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRateHeadersConflict(t *testing.T) {
	t.Parallel()
	// OpenAI's names and GitHub's bare ones on one response: OpenAI's win
	// for requests, and tokens come from OpenAI too.
	h := hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "59", "x-ratelimit-reset-requests", "1s",
		"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "1", "x-ratelimit-reset", itoa(pacerEpoch.Unix()+60),
		"RateLimit-Limit", "7", "RateLimit-Remaining", "7", "RateLimit-Reset", "1")
	want := rateObs{requests: limitObs{kind: kindBucket, limit: 60, remaining: 59, reset: time.Second}}
	if diff := cmp.Diff(want, parseRateHeaders(h, pacerEpoch, nil), obsCmp); diff != "" {
		t.Errorf("parseRateHeaders (-want +got):\n%s", diff)
	}
	if o := parseRateHeaders(http.Header{"Content-Type": {"text/plain"}}, pacerEpoch, nil); !o.empty() {
		t.Errorf("parseRateHeaders of a response without rate-limit headers = %+v, want empty", o)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestPacerCredentialKey checks which credential header keys a request by
// default: the first present of Authorization, X-Api-Key and Api-Key.
func TestPacerCredentialKey(t *testing.T) {
	t.Parallel()
	var p Pacer
	req := func(kv ...string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/x", nil)
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return r
	}
	tests := []struct {
		name string
		a, b *http.Request
		same bool
	}{
		{name: "x-api-key values differ", a: req("X-Api-Key", "a"), b: req("X-Api-Key", "b")},
		{name: "api-key values differ", a: req("Api-Key", "a"), b: req("Api-Key", "b")},
		{name: "api-key same value", a: req("Api-Key", "a", "Content-Type", "application/json"), b: req("Api-Key", "a"), same: true},
		{name: "authorization wins over x-api-key", a: req("Authorization", "a", "X-Api-Key", "b"), b: req("Authorization", "a"), same: true},
		{name: "x-api-key wins over api-key", a: req("X-Api-Key", "a", "Api-Key", "b"), b: req("X-Api-Key", "a", "Api-Key", "c"), same: true},
		{name: "second value counts", a: req("Api-Key", "a", "Api-Key", "b"), b: req("Api-Key", "a", "Api-Key", "c")},
		{name: "credential or none", a: req("Api-Key", "a"), b: req()},
		{name: "one value in two headers", a: req("Authorization", "a"), b: req("X-Api-Key", "a")},
		{name: "one value or two", a: req("Api-Key", "a"), b: req("Api-Key", "a", "Api-Key", "b")},
	}
	for _, tt := range tests {
		if got := p.hash(tt.a) == p.hash(tt.b); got != tt.same {
			t.Errorf("%s: same key = %v, want %v", tt.name, got, tt.same)
		}
	}
}

func TestPolicyMemo(t *testing.T) {
	t.Parallel()
	const (
		a = `"rpm";q=600;w=60, "tpm";q=1000000;qu="tokens";w=60`
		b = `"rpm";q=60;w=60`
	)
	limits := `"rpm";r=10;t=30, "tpm";r=5000;t=30`
	var m policyMemo
	first := m.read(a)
	if again := m.read(a); again != first {
		t.Error("the same RateLimit-Policy text was read again, not taken from the memo")
	}
	// Each text, in turn, reads as it would without a memo.
	for i, text := range []string{a, b, a, "", b, b} {
		h := hdr("RateLimit-Policy", text, "RateLimit", limits)
		if diff := cmp.Diff(parseIETF(h, nil), parseIETF(h, &m), obsCmp); diff != "" {
			t.Errorf("step %d, policy %q: with a memo (-without +with):\n%s", i, text, diff)
		}
	}
	if got := m.read(b); got.n != 1 || got.p[0].q != 60 {
		t.Errorf("memo of %q = %+v, want one policy of 60", b, got)
	}
}

func TestPolicyMemoConcurrent(t *testing.T) {
	t.Parallel()
	var m policyMemo
	texts := []string{`"rpm";q=600;w=60`, `"rpm";q=60;w=60`, `"rpm";q=6;w=60`}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				text := texts[(g+i)%len(texts)]
				h := hdr("RateLimit-Policy", text, "RateLimit", `"rpm";r=1;t=1`)
				if got, want := parseIETF(h, &m), parseIETF(h, nil); got != want {
					t.Errorf("policy %q: with a shared memo %+v, without %+v", text, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestUnixUTC(t *testing.T) {
	t.Parallel()
	// Every day a parser can pass, including days past a month's end and
	// the years around 0, 1970, leap centuries and 9999, as time.Date has it.
	years := []int{0, 1, 3, 4, 99, 100, 399, 400, 401, 1600, 1700, 1900, 1969, 1970, 1972, 2000, 2024, 2026, 2100, 2400, 9999}
	for _, y := range years {
		for m := 1; m <= 12; m++ {
			for d := 1; d <= 31; d++ {
				for _, hms := range [][3]int{{0, 0, 0}, {23, 59, 59}, {23, 59, 60}, {12, 30, 7}} {
					want := time.Date(y, time.Month(m), d, hms[0], hms[1], hms[2], 0, time.UTC)
					if got := unixUTC(y, m, d, hms[0], hms[1], hms[2]); !got.Equal(want) || got.Location() != time.UTC {
						t.Fatalf("unixUTC(%d, %d, %d, %v) = %v, want %v", y, m, d, hms, got, want)
					}
				}
			}
		}
	}
}
