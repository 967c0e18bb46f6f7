package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jonboulle/clockwork"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// learnStore is a pace.Store in memory that grants every
// reservation at once, with zero marks, and records what the Pacer
// reports, by key.
type learnStore struct {
	mu       sync.Mutex // protects the fields below
	reserved map[string]int
	learned  map[string][]pace.Report
}

func newLearnStore() *learnStore {
	return &learnStore{reserved: map[string]int{}, learned: map[string][]pace.Report{}}
}

func (s *learnStore) Reserve(_ context.Context, key string, _ float64, _ time.Duration) (pace.Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved[key]++
	return pace.Grant{}, nil
}

func (s *learnStore) Learn(_ context.Context, key string, r pace.Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.learned[key] = append(s.learned[key], r)
	return nil
}

// reports returns what key was taught, and how often it was reserved.
func (s *learnStore) reports(key string) ([]pace.Report, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.learned[key]), s.reserved[key]
}

// player is the RoundTripper under the Transport: it answers each request
// with the next recorded response of its cassette, after checking that the
// request is the one recorded.
type player struct {
	c    *cassette
	mu   sync.Mutex // protects next
	next int
}

func (p *player) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	i := p.next
	p.next++
	p.mu.Unlock()
	if i >= len(p.c.Interactions) {
		return nil, fmt.Errorf("%s: request %d, but only %d were recorded", p.c.name, i+1, len(p.c.Interactions))
	}
	in := &p.c.Interactions[i]
	if req.Method != in.Request.Method || req.URL.String() != in.Request.URL || string(body) != in.Request.Body {
		return nil, fmt.Errorf("%s #%d: %s %s is not the request recorded", p.c.name, i+1, req.Method, req.URL)
	}
	h := make(http.Header, len(in.Response.Headers))
	for k, vs := range in.Response.Headers {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	return &http.Response{
		Status:        in.Response.Status,
		StatusCode:    in.Response.Code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(in.Response.Body)),
		ContentLength: int64(len(in.Response.Body)),
		Request:       req,
	}, nil
}

// interactionKey carries an interaction's name in its request's context,
// for Pacer.Key.
type interactionKey struct{}

// replayCost is the Cost of every replayed request: any positive estimate
// makes the Pacer count tokens.
const replayCost = 500

// rateTolerance is how far, relatively, a learned rate may be from the
// one the headers give. Both are quotients of the same whole numbers and
// whole seconds, computed in float64, so they differ by rounding alone,
// some 1e-16; any difference of model is far larger: a second more or
// less on a reset of up to a day is 1.2e-5, another period more still.
const rateTolerance = 1e-9

// TestCassettesPacer replays every recorded response of Anthropic's API
// through a Transport and its Pacer, and checks what the Pacer learned
// from each against the numbers of the response's own headers.
//
// Each interaction is a key of its own (Pacer.Key reads its name from the
// request's context), so that what the Pacer reports of it depends on that
// response alone: the first observation of a bucket. The Transport's clock
// is set to each response's Date before its request, so that the recorded
// resets are read at the instant they were recorded.
func TestCassettesPacer(t *testing.T) {
	var table strings.Builder
	tw := newTable(&table)
	interactions, limited := 0, 0
	cassettes := loadCassettes(t)
	for i := range cassettes {
		c := &cassettes[i]
		interactions += len(c.Interactions)
		limited += replay(t, c, tw)
	}
	tw.Flush()
	t.Logf("what the Pacer learned, by recorded response:\n%s", table.String())
	t.Logf("%d cassettes, %d interactions, %d with rate-limit headers", len(cassettes), interactions, limited)
}

// replay plays c's interactions in order through one Transport, writes a
// row of tw for each, and returns how many carried rate-limit headers.
func replay(t *testing.T, c *cassette, tw io.Writer) int {
	t.Helper()
	store := newLearnStore()
	clock := clockwork.NewFakeClock()
	if len(c.Interactions) > 0 {
		clock = clockwork.NewFakeClockAt(responseDate(t, c, 0, time.Time{}))
	}
	client := &http.Client{Transport: &retry.Transport{
		Base: &player{c: c},
		Policy: retry.Policy{
			MaxAttempts:      1, // a refusal is returned, not retried on the next recording
			Clock:            clock,
			RetryAfterJitter: 0, // a Retry-After is held exactly, and Block is the header's
		},
		Pacer: &pace.Pacer{
			Key:          func(r *http.Request) string { k, _ := r.Context().Value(interactionKey{}).(string); return k },
			Cost:         func(*http.Request) int64 { return replayCost },
			Store:        store,
			StoreTimeout: time.Minute, // a slow run must not turn the Pacer from its store
			OnFallback:   func(err error) { t.Errorf("%s: the Pacer fell back from its store: %v", c.name, err) },
		},
	}}
	limited := 0
	for i := range c.Interactions {
		key := fmt.Sprintf("%s #%d", c.name, i+1)
		if d := responseDate(t, c, i, clock.Now()); d.After(clock.Now()) {
			clock.Advance(d.Sub(clock.Now()))
		}
		status := send(t, client, c, i, key)
		h := http.Header(c.Interactions[i].Response.Headers)
		if hasRateLimit(h) {
			limited++
		}
		got, reserved := store.reports(key)
		if reserved != 1 {
			t.Errorf("%s: the Pacer asked its store %d times before the request, want once", key, reserved)
		}
		checkLearned(t, key, h, status, clock.Now(), got)
		checkUnread(t, key, h)
		writeRow(tw, c.name, i+1, status, got)
	}
	return limited
}

// responseDate returns the Date of c's interaction i, or def when it has
// none.
func responseDate(t *testing.T, c *cassette, i int, def time.Time) time.Time {
	t.Helper()
	v := http.Header(c.Interactions[i].Response.Headers).Get("Date")
	if v == "" {
		return def
	}
	d, err := http.ParseTime(v)
	if err != nil {
		t.Errorf("%s #%d: Date %q: %v", c.name, i+1, v, err)
		return def
	}
	return d
}

// send makes c's interaction i through client and returns the status
// received, after checking that the recorded response came through whole.
func send(t *testing.T, client *http.Client, c *cassette, i int, key string) int {
	t.Helper()
	in := &c.Interactions[i]
	ctx := context.WithValue(t.Context(), interactionKey{}, key)
	req, err := http.NewRequestWithContext(ctx, in.Request.Method, in.Request.URL, strings.NewReader(in.Request.Body))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	for k, vs := range in.Request.Headers {
		req.Header[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s: %v", key, err)
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != in.Response.Code || string(body) != in.Response.Body {
		t.Errorf("%s: got status %d and %d bytes of body (%v), want the recorded %d and %d bytes",
			key, resp.StatusCode, len(body), err, in.Response.Code, len(in.Response.Body))
	}
	return resp.StatusCode
}

// checkLearned compares what the Pacer reported of one response, read at
// now, with what its headers say.
func checkLearned(t *testing.T, key string, h http.Header, status int, now time.Time, got []pace.Report) {
	t.Helper()
	want, ok := wantReport(h, status, now)
	switch {
	case !ok && len(got) != 0:
		t.Errorf("%s: no rate-limit headers, yet the Pacer reported %+v", key, got)
	case !ok:
	case len(got) != 1:
		t.Errorf("%s: the Pacer reported %d times, want once: %+v", key, len(got), got)
	default:
		if diff := cmp.Diff(want, got[0], cmpopts.EquateApprox(rateTolerance, 0)); diff != "" {
			t.Errorf("%s: the Pacer learned other than the headers say (-want +got):\n%s", key, diff)
		}
	}
}

// newTable returns the table of what the Pacer learned, its heading
// written, for writeRow.
func newTable(w io.Writer) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cassette\t#\tstatus\trequests\tleft\ttokens\tleft\trequests/min\ttokens/min\t")
	return tw
}

// writeRow writes one row of the table: what the Pacer reported of a
// response, or dashes when it reported nothing.
func writeRow(tw io.Writer, cassette string, n, status int, got []pace.Report) {
	var r pace.Report
	if len(got) > 0 {
		r = got[len(got)-1]
	}
	dim := func(l pace.Limit) (limit, left, perMinute string) {
		if l.Limit == 0 {
			return "-", "-", "-"
		}
		return fmt.Sprintf("%.0f", l.Limit), fmt.Sprintf("%.0f", l.Remaining), fmt.Sprintf("%.6g", l.Rate*60)
	}
	rl, rr, rm := dim(r.Requests)
	tl, tr, tm := dim(r.Tokens)
	fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", cassette, n, status, rl, rr, tl, tr, rm, tm)
}

// TestCassettesPacerModel plays made-up responses through the same replay,
// to check the model the recordings are checked by where they do not reach
// it: every recorded reset is at or before its response's Date, so the
// recordings show only the default rate, the limit per minute.
func TestCassettesPacerModel(t *testing.T) {
	date := time.Date(2025, 10, 30, 16, 17, 37, 0, time.UTC)
	limits := func(prefix string, limit, remaining int, reset time.Duration) map[string][]string {
		return map[string][]string{
			prefix + "-Limit":     {fmt.Sprint(limit)},
			prefix + "-Remaining": {fmt.Sprint(remaining)},
			prefix + "-Reset":     {date.Add(reset).Format(time.RFC3339Nano)},
		}
	}
	tests := []struct {
		name    string
		code    int
		headers []map[string][]string
	}{
		{name: "a rate that fits the limit per minute", code: 200,
			headers: []map[string][]string{limits(requestsPrefix, 4000, 3000, 15*time.Second)}},
		{name: "a rate that fits no period", code: 200,
			headers: []map[string][]string{limits(requestsPrefix, 4000, 3000, 5*time.Second)}},
		{name: "a reset to the millisecond, per second", code: 200,
			headers: []map[string][]string{limits(requestsPrefix, 100, 50, 500*time.Millisecond)}},
		{name: "input tokens without the combined limit", code: 200, headers: []map[string][]string{
			limits(requestsPrefix, 50, 49, 2*time.Second), limits(inputPrefix, 40000, 30000, 20*time.Second)}},
		{name: "both token limits", code: 200, headers: []map[string][]string{
			limits(tokensPrefix, 56000, 46000, 12*time.Second), limits(inputPrefix, 40000, 30000, 20*time.Second)}},
		{name: "a refusal with Retry-After", code: 429, headers: []map[string][]string{
			limits(requestsPrefix, 50, 0, 2*time.Second), {"Retry-After": {"30"}}}},
		{name: "no rate-limit headers", code: 200},
	}
	c := cassette{name: "made-up"}
	for _, tt := range tests {
		in := interaction{Response: recordedResponse{
			Code:    tt.code,
			Status:  fmt.Sprint(tt.code, " ", http.StatusText(tt.code)),
			Headers: map[string][]string{"Date": {date.Format(http.TimeFormat)}},
			Body:    `{"name":"` + tt.name + `"}`,
		}}
		in.Request.Method, in.Request.URL, in.Request.Body = http.MethodPost, "https://api.anthropic.com/v1/messages", "{}"
		for _, h := range tt.headers {
			for k, vs := range h {
				in.Response.Headers[k] = vs
			}
		}
		c.Interactions = append(c.Interactions, in)
	}
	var table strings.Builder
	tw := newTable(&table)
	if n := replay(t, &c, tw); n != len(tests)-1 {
		t.Errorf("%d responses with rate-limit headers, want %d", n, len(tests)-1)
	}
	tw.Flush()
	t.Logf("what the Pacer learned, by made-up response:\n%s", table.String())
}
