package pace

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/sfv"
	"github.com/retrykit/retry/internal/wire"
)

// This file reads the rate-limit headers the Pacer learns from. Each parser
// is a pure function of a response's header (and, where the server sends
// absolute times, of the instant the response is read), so that each can be
// tested and fuzzed alone. A value that cannot be true is dropped, never
// believed: a bad header must not stop a key (or worse, every key) for long.

// limitKind says how a limit refills.
type limitKind uint8

const (
	kindNone   limitKind = iota // nothing believable was said
	kindBucket                  // a token bucket refilling continuously
	kindWindow                  // a fixed window: remaining until reset, then the whole limit
)

// limitObs is what one response says about one dimension (requests or
// tokens) of a limit.
type limitObs struct {
	kind      limitKind
	limit     float64       // the bucket's size, or the window's quota; > 0
	remaining float64       // what is left now, in [0, limit]
	reset     time.Duration // bucket: until full again; window: until it ends; in [0, wire.MaxReset]
	slack     time.Duration // how coarse reset is: a second for RFC 3339 and Unix times, else 0
	end       int64         // window: when it ends in the server's Unix seconds, when the format says; else 0
	window    time.Duration // window: its length, when the format states it (IETF w); else 0
}

// rateObs is what one response says about its key's limits.
type rateObs struct {
	requests, tokens limitObs
	resource         string  // GitHub's x-ratelimit-resource: which of its limits this is
	concurrent       float64 // the requests the server takes at once, when it states it; else 0
}

// full reports an observation of both dimensions: another format has
// nothing to add.
func (o *rateObs) full() bool {
	return o.requests.kind != kindNone && o.tokens.kind != kindNone
}

// empty reports an observation that teaches nothing.
func (o *rateObs) empty() bool {
	return o.requests.kind == kindNone && o.tokens.kind == kindNone && o.concurrent == 0
}

// parseRateHeaders reads every format the Pacer knows from h. When a
// response carries more than one format, the first that says anything
// about a dimension wins, in this order: Anthropic's and OpenAI's names
// (which cannot be mistaken for anything else), the IETF RateLimit fields,
// the older RateLimit-* fields, then GitHub's, whose bare x-ratelimit-*
// names gateways also use loosely. now dates absolute times when the
// response has no valid Date header. memo, which may be nil, keeps the
// IETF policies read last.
func parseRateHeaders(h http.Header, now time.Time, memo *policyMemo) rateObs {
	var o rateObs
	if len(h) == 0 {
		return o
	}
	merge := func(p rateObs) {
		if o.requests.kind == kindNone {
			o.requests = p.requests
		}
		if o.tokens.kind == kindNone {
			o.tokens = p.tokens
		}
		if o.resource == "" {
			o.resource = p.resource
		}
		if o.concurrent == 0 {
			o.concurrent = p.concurrent
		}
	}
	if o = parseAnthropic(h, now); o.full() { // the first format read needs no merging
		return o
	}
	if merge(parseOpenAI(h)); o.full() {
		return o
	}
	if merge(parseIETF(h, memo)); o.full() {
		return o
	}
	merge(parseIETFLegacy(h, memo))
	merge(parseGitHub(h, now))
	return o
}

// parseOpenAI reads OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}.
// The resets are the time until the bucket is full again, written as Go
// durations ("1s", "6m0s", "12ms", "1m30.5s"); Azure OpenAI sends plain
// seconds. The limits are token buckets refilling continuously.
func parseOpenAI(h http.Header) rateObs {
	// The limits say whether the format is OpenAI's; each is looked up
	// once, as every lookup costs.
	lr, lt := h["X-Ratelimit-Limit-Requests"], h["X-Ratelimit-Limit-Tokens"]
	if len(lr) == 0 && len(lt) == 0 {
		return rateObs{}
	}
	return rateObs{
		requests: openAIDim(h, lr, "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"),
		tokens:   openAIDim(h, lt, "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"),
	}
}

// openAIDim reads one dimension, given its limit's values.
func openAIDim(h http.Header, limitValues []string, remainingKey, resetKey string) limitObs {
	limit, ok := firstCount(limitValues)
	if !ok {
		return limitObs{}
	}
	remaining, ok := headerCount(h, remainingKey)
	if !ok {
		return limitObs{}
	}
	v, ok := wire.HeaderValue(h, resetKey)
	if !ok {
		return limitObs{}
	}
	reset, ok := parseResetDuration(v)
	if !ok {
		return limitObs{}
	}
	return bucketObs(limit, remaining, reset, 0)
}

// parseResetDuration reads a reset written as a Go duration ("6m0s") or as
// plain seconds ("20", "0.5").
func parseResetDuration(v string) (time.Duration, bool) {
	if d, ok := wire.ParseDecimal(v, float64(time.Second)); ok {
		return d, d <= wire.MaxReset
	}
	if len(v) > 64 || v[0] == '-' || v[0] == '+' {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 0 && d <= wire.MaxReset
}

// anthropicKeys are the header names of Anthropic's dimensions, written
// out so that reading them builds no string: requests, then the tokens
// dimensions in order of preference (the combined limit when it is sent,
// else the input tokens, which is what a request's Cost can know before it
// is sent).
var anthropicKeys = [...][3]string{
	{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
}

// parseAnthropic reads anthropic-ratelimit-{requests,tokens,input-tokens}-{limit,remaining,reset}.
// The resets are RFC 3339 times at which the bucket is full again; they are
// read relative to the response's Date header, so that a skew between the
// server's clock and ours cancels out (now stands in for a missing Date).
func parseAnthropic(h http.Header, now time.Time) rateObs {
	var o rateObs
	// The first limit sent says the format is Anthropic's; the limits
	// looked up to find it are kept, as every lookup costs.
	var limits [len(anthropicKeys)][]string
	first := -1
	for i := range anthropicKeys {
		if limits[i] = h[anthropicKeys[i][0]]; len(limits[i]) > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return o // the common case: not Anthropic
	}
	date := responseDate(h, now)
	o.requests = anthropicDim(h, &anthropicKeys[0], limits[0], date)
	for i := 1; i < len(anthropicKeys) && o.tokens.kind == kindNone; i++ {
		if i > first {
			limits[i] = h[anthropicKeys[i][0]]
		}
		o.tokens = anthropicDim(h, &anthropicKeys[i], limits[i], date)
	}
	return o
}

// anthropicDim reads one dimension, given its limit's values.
func anthropicDim(h http.Header, keys *[3]string, limitValues []string, date time.Time) limitObs {
	limit, ok := firstCount(limitValues)
	if !ok {
		return limitObs{}
	}
	remaining, ok := headerCount(h, keys[1])
	if !ok {
		return limitObs{}
	}
	v, ok := wire.HeaderValue(h, keys[2])
	if !ok || len(v) > 64 {
		return limitObs{}
	}
	at, err := parseRFC3339(v)
	if err != nil {
		return limitObs{}
	}
	reset := max(at.Sub(date), 0) // a reset already past: full now
	if reset > wire.MaxReset {
		return limitObs{}
	}
	var slack time.Duration
	if at.Nanosecond() == 0 {
		slack = time.Second // second precision, and Date has no more
	}
	return bucketObs(limit, remaining, reset, slack)
}

// parseGitHub reads x-ratelimit-{limit,remaining,reset,resource}, GitHub's
// names, which many gateways and limiters also send. The reset is when the
// current fixed window ends: a Unix time in seconds (GitHub), read
// relative to the response's Date, or the seconds until then (see
// resetIsDelta). GitHub counts requests only.
func parseGitHub(h http.Header, now time.Time) rateObs {
	limit, ok1 := firstCount(h["X-Ratelimit-Limit"])
	if !ok1 {
		return rateObs{} // the common case: not GitHub's format
	}
	remaining, ok2 := headerCount(h, "X-Ratelimit-Remaining")
	secs, ok3 := headerCount(h, "X-Ratelimit-Reset")
	if !ok2 || !ok3 || secs > 1<<40 {
		return rateObs{}
	}
	var reset time.Duration
	var end int64
	if wire.ResetIsDelta(secs) {
		reset = time.Duration(secs * float64(time.Second))
	} else {
		end = int64(secs)
		reset = max(time.Unix(end, 0).Sub(responseDate(h, now)), 0)
	}
	if reset > wire.MaxReset {
		return rateObs{}
	}
	resource, _ := wire.HeaderValue(h, "X-Ratelimit-Resource")
	if len(resource) > 64 {
		resource = ""
	}
	o := rateObs{requests: windowObs(limit, remaining, reset, time.Second), resource: resource}
	if o.requests.kind != kindNone {
		o.requests.end = end
	}
	return o
}

// parseIETFLegacy reads the RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset fields of the earlier drafts of
// draft-ietf-httpapi-ratelimit-headers (up to draft 6), which many gateways
// and limiters still send. The reset is delta-seconds until the window's
// quota returns. The window's length may be named by the limit, a list
// ("100, 100;w=60"), or by a RateLimit-Policy of the draft-6 form
// ("100;w=60").
func parseIETFLegacy(h http.Header, memo *policyMemo) rateObs {
	lv, ok1 := headerJoined(h, "Ratelimit-Limit")
	if !ok1 {
		return rateObs{} // the common case: not these fields
	}
	remaining, ok2 := headerCount(h, "Ratelimit-Remaining")
	secs, ok3 := headerCount(h, "Ratelimit-Reset")
	if !ok2 || !ok3 || secs > wire.MaxReset.Seconds() {
		return rateObs{}
	}
	// The first member is the limit in force; the later ones describe
	// quota policies, one of which gives its window.
	var sc sfv.Scanner
	var m sfMember
	var limit, w float64
	for sc.List(lv); sc.Next(); {
		readMember(&sc, &m)
		switch {
		case m.bad || !m.isNum:
			return rateObs{}
		case limit == 0:
			limit, w = m.num, m.w
		case w == 0 && m.num == limit:
			w = m.w
		}
	}
	if sc.Err() != nil || limit == 0 {
		return rateObs{}
	}
	if pv, ok := headerJoined(h, "Ratelimit-Policy"); ok && w == 0 {
		w = memo.read(pv).window(limit)
	}
	return rateObs{requests: ietfObs(limit, remaining, time.Duration(secs*float64(time.Second)), w)}
}

// parseIETFDict reads the RateLimit field of draft 7 of
// draft-ietf-httpapi-ratelimit-headers, a dictionary of the limit, what
// remains and the delta-seconds until the quota returns
// ("limit=50, remaining=49, reset=10"), with the window's length from a
// RateLimit-Policy of bare quotas ("50;w=10"). It reports false when v is
// not such a dictionary: a list of the later drafts, most often.
func parseIETFDict(v, policy string, memo *policyMemo) (rateObs, bool) {
	var limit, remaining, reset float64
	var seen int
	var sc sfv.Scanner
	for sc.Dict(v); sc.Next(); {
		var bit int
		switch sc.Key() {
		case "limit":
			bit = 1
		case "remaining":
			bit = 2
		case "reset":
			bit = 4
		default:
			continue
		}
		n, ok := sc.Item().Number()
		if !ok || n < 0 || sc.Inner() {
			return rateObs{}, true // draft 7's names, not its numbers: nothing believed
		}
		switch bit {
		case 1:
			limit = n
		case 2:
			remaining = n
		case 4:
			reset = n
		}
		seen |= bit
	}
	if sc.Err() != nil || seen == 0 {
		return rateObs{}, false
	}
	if seen != 7 || reset > wire.MaxReset.Seconds() {
		return rateObs{}, true
	}
	var w float64
	if policy != "" {
		w = memo.read(policy).window(limit)
	}
	return rateObs{requests: ietfObs(limit, remaining, time.Duration(reset*float64(time.Second)), w)}, true
}

// ietfPolicy is one quota policy of a RateLimit-Policy field: named, with
// its quota q (drafts 8 on), or a bare quota (drafts 6 and 7, "50;w=10").
type ietfPolicy struct {
	name string
	q, w float64
	dim  int // 0 requests, 1 tokens, 2 requests in flight, -1 not paced
}

// window returns the window, in seconds, of the bare quota of limit, or 0.
func (c *ietfPolicies) window(limit float64) float64 {
	for _, p := range c.p[:c.n] {
		if p.name == "" && p.q == limit {
			return p.w
		}
	}
	return 0
}

// ietfPolicies is a RateLimit-Policy field read: its text, and the
// policies it names, at most eight (more are not read).
type ietfPolicies struct {
	text string
	n    int
	p    [8]ietfPolicy
}

// policyMemo keeps the last RateLimit-Policy field read, for a Pacer. The
// field describes a server's quota policies, which change rarely, and
// every response repeats it: reading it again costs more than the rest of
// the observation, so it is read only when its text changes. Safe for
// concurrent use; the zero value is empty.
type policyMemo struct {
	last atomic.Pointer[ietfPolicies] // replaced whole, never changed
}

// read returns the policies of the field text, from m when it holds them.
// A nil m reads the text every time.
func (m *policyMemo) read(text string) *ietfPolicies {
	if m != nil {
		if c := m.last.Load(); c != nil && c.text == text {
			return c
		}
	}
	c := &ietfPolicies{text: text}
	var sc sfv.Scanner
	var it sfMember
	for sc.List(text); sc.Next(); {
		if readMember(&sc, &it); c.n == len(c.p) {
			continue // more are not read, but the field must parse
		}
		p := ietfPolicy{name: it.name, q: it.q, w: it.w}
		if it.isNum { // a bare quota
			p.q = it.num
		}
		switch it.qu {
		case "", "requests":
		case "tokens":
			p.dim = 1
		case "concurrent-requests":
			p.dim = 2
		default:
			p.dim = -1
		}
		if it.bad || p.q <= 0 {
			p.dim = -1
		}
		c.p[c.n] = p
		c.n++
	}
	if sc.Err() != nil {
		c.n = 0 // a field that does not parse names no policy
	}
	if m != nil {
		m.last.Store(c)
	}
	return c
}

// parseIETF reads the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers: structured-field lists of named
// policies, each a quota q of unit qu ("requests" when absent) per window
// of w seconds, and for each, r units available now and t seconds until the
// quota resets. A unit of "tokens", which LLM gateways use, counts as
// tokens; a unit of "concurrent-requests" sets the key's concurrency
// limit to the quota; other units are not paced. Where several policies bind one
// dimension, the one with the least available wins. The partition key pk
// is not read: Pacer.Key says which requests share a limit. memo, which may
// be nil, keeps the policies read last.
func parseIETF(h http.Header, memo *policyMemo) rateObs {
	rv, ok := headerJoined(h, "Ratelimit")
	if !ok {
		return rateObs{} // the common case: not these fields
	}
	pv, ok := headerJoined(h, "Ratelimit-Policy")
	if o, dict := parseIETFDict(rv, pv, memo); dict {
		return o
	}
	if !ok {
		return rateObs{}
	}
	pols := memo.read(pv)
	var visited [len(pols.p)]bool // a policy is read from its first member only
	var o rateObs
	var sc sfv.Scanner
	var it sfMember
	for sc.List(rv); sc.Next(); {
		readMember(&sc, &it)
		for i := range pols.p[:pols.n] {
			p := &pols.p[i]
			if p.name == "" || p.name != it.name || p.dim < 0 || visited[i] {
				continue
			}
			visited[i] = true
			if p.dim == 2 { // a limit on requests in flight: the quota is the limit
				if !it.bad && (o.concurrent == 0 || p.q < o.concurrent) {
					o.concurrent = p.q
				}
				break
			}
			if it.bad || !it.hasR || it.t > wire.MaxReset.Seconds() {
				break
			}
			t := it.t
			if !it.hasT { // the quota returns within a window at most
				t = p.w
			}
			obs := ietfObs(p.q, it.r, time.Duration(t*float64(time.Second)), p.w)
			dst := &o.requests
			if p.dim == 1 {
				dst = &o.tokens
			}
			if obs.kind != kindNone && (dst.kind == kindNone || obs.remaining < dst.remaining) {
				*dst = obs
			}
		}
	}
	if sc.Err() != nil {
		return rateObs{} // the whole field parses, or nothing of it is believed
	}
	return o
}

// ietfObs is what the IETF fields say of a quota of q per window of w
// seconds with remaining left and reset to go: a fixed window, whose quota
// returns whole at the reset. Its length is w when the field states one
// within range, else unknown.
func ietfObs(q, remaining float64, reset time.Duration, w float64) limitObs {
	o := windowObs(q, remaining, reset, time.Second)
	if o.kind != kindNone && w > 0 && w <= wire.MaxReset.Seconds() {
		o.window = time.Duration(w * float64(time.Second))
	}
	return o
}

// bucketObs checks a token bucket's numbers: a limit of 0 or less, a
// remaining above it, or a reset out of range cannot be true.
func bucketObs(limit, remaining float64, reset, slack time.Duration) limitObs {
	if !sane(limit, remaining, reset) {
		return limitObs{}
	}
	return limitObs{kind: kindBucket, limit: limit, remaining: remaining, reset: reset, slack: slack}
}

// windowObs is bucketObs for a fixed window.
func windowObs(limit, remaining float64, reset, slack time.Duration) limitObs {
	if !sane(limit, remaining, reset) {
		return limitObs{}
	}
	return limitObs{kind: kindWindow, limit: limit, remaining: remaining, reset: reset, slack: slack}
}

func sane(limit, remaining float64, reset time.Duration) bool {
	return limit > 0 && limit <= 1e15 && remaining >= 0 && remaining <= limit &&
		reset >= 0 && reset <= wire.MaxReset
}
