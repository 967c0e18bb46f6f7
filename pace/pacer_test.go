package pace

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/retrykit/retry"
)

// at returns pacerEpoch plus d, in Unix nanoseconds.
func at(d time.Duration) int64 { return pacerEpoch.Add(d).UnixNano() }

func TestBucketServesFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	var b bucket
	// 10 per 10 s, none left: one unit a second.
	b.learn(&limitObs{kind: kindBucket, limit: 10, remaining: 0, reset: 10 * time.Second}, snapshot{}, at(0))
	var waits []time.Duration
	for range 4 {
		w, _ := b.take(1, at(0))
		waits = append(waits, w)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits of four callers arriving together (-want +got):\n%s", diff)
	}
	// The second caller gives up: those behind it move up.
	b.untake(1)
	if w, _ := b.take(1, at(0)); w != 4*time.Second {
		t.Errorf("wait after a cancel = %v, want 4s", w)
	}
}

func TestBucketLearnsDownNeverUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		remaining float64 // what the server reports for the request
		wantLevel float64 // the level after, at the same instant
	}{
		{name: "server agrees", remaining: 49, wantLevel: 49},
		{name: "server has less", remaining: 40, wantLevel: 40},
		{name: "server has more: not believed", remaining: 60 - 1, wantLevel: 49},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bucket
			// A full bucket of 60 a minute, 10 used: 50 left.
			b.learn(&limitObs{kind: kindBucket, limit: 60, remaining: 50, reset: 10 * time.Second}, snapshot{}, at(0))
			b.rate = 0 // no refill, so that levels compare exactly
			b.take(1, at(0))
			snap := b.send(1, at(0))
			b.learn(&limitObs{kind: kindBucket, limit: 60, remaining: tt.remaining, reset: 0}, snap, at(0))
			if b.level != tt.wantLevel {
				t.Errorf("level = %v, want %v", b.level, tt.wantLevel)
			}
		})
	}
}

func TestBucketCorrectsOnce(t *testing.T) {
	t.Parallel()
	var b bucket
	b.learn(&limitObs{kind: kindBucket, limit: 100, remaining: 100, reset: 0}, snapshot{}, at(0))
	b.rate = 0
	// Three requests in flight; the server had already counted five others
	// when they arrived, so it reports each 5 lower than the bucket.
	var s1, s2, s3 snapshot
	for _, s := range []*snapshot{&s1, &s2, &s3} {
		b.take(1, at(0))
		*s = b.send(1, at(0))
	}
	for i, s := range []snapshot{s1, s2, s3} {
		b.learn(&limitObs{kind: kindBucket, limit: 100, remaining: 99 - float64(i) - 5}, s, at(0))
	}
	if want := 100.0 - 3 - 5; b.level != want {
		t.Errorf("level = %v, want %v: the same shortfall was counted more than once", b.level, want)
	}
}

func TestBucketWindow(t *testing.T) {
	t.Parallel()
	var b bucket
	// GitHub: 2 left of 100 until the window ends in 30 s, read to the
	// second: the end may be up to a second later.
	b.learn(&limitObs{kind: kindWindow, limit: 100, remaining: 2, reset: 30 * time.Second, slack: time.Second}, snapshot{}, at(0))
	var waits []time.Duration
	for range 3 {
		w, _ := b.take(1, at(0))
		waits = append(waits, w)
	}
	want := []time.Duration{0, 0, 31 * time.Second}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	// The two granted at once go out.
	b.send(1, at(0))
	b.send(1, at(0))
	// After the window, the whole limit returns, less the caller carried over.
	b.advance(at(31 * time.Second))
	if b.level != 99 {
		t.Errorf("level in the next window = %v, want 99", b.level)
	}
}

func TestPacerDefaultKey(t *testing.T) {
	t.Parallel()
	var p Pacer
	req := func(url, auth string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	a := p.hash(req("https://api.example.com/v1/x", "Bearer a"))
	tests := []struct {
		name string
		req  *http.Request
		same bool
	}{
		{name: "same host and key, other path", req: req("https://api.example.com/v1/y", "Bearer a"), same: true},
		{name: "other key", req: req("https://api.example.com/v1/x", "Bearer b")},
		{name: "no key", req: req("https://api.example.com/v1/x", "")},
		{name: "other host", req: req("https://other.example.com/v1/x", "Bearer a")},
	}
	for _, tt := range tests {
		if got := p.hash(tt.req) == a; got != tt.same {
			t.Errorf("%s: same key = %v, want %v", tt.name, got, tt.same)
		}
	}
}

func TestPacerNothingKnownAllocatesNothing(t *testing.T) {
	var p Pacer
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	var tk paceTicket
	if n := testing.AllocsPerRun(100, func() { p.reserve(&tk, req, nil, time.Hour) }); n != 0 {
		t.Errorf("reserve with nothing known: %v allocations, want 0", n)
	}
	// Another key's limits are known: still nothing for this one.
	other, _ := http.NewRequest(http.MethodGet, "https://other.example.com/", nil)
	k := p.add(other, 0)
	k.requests.learn(&limitObs{kind: kindBucket, limit: 1, remaining: 0, reset: time.Second}, snapshot{}, at(0))
	if n := testing.AllocsPerRun(100, func() { p.reserve(&tk, req, nil, time.Hour) }); n != 0 {
		t.Errorf("reserve for an unknown key: %v allocations, want 0", n)
	}
	// Learning from a response allocates nothing either, once the key
	// exists: not even the report a store would get.
	resp := &http.Response{StatusCode: http.StatusOK, Header: openAIHeaders(10, 5, "1s")}
	var pol retry.Policy
	if n := testing.AllocsPerRun(100, func() {
		p.reserve(&tk, other, nil, time.Hour)
		p.observe(&tk, other, resp, nil, pol.Clock, 0, time.Hour)
	}); n != 0 {
		t.Errorf("reserve and observe of a known key: %v allocations, want 0", n)
	}
}

func TestBucketRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		obs  limitObs
		want float64 // units per second
	}{
		{name: "per minute, exact", obs: limitObs{limit: 600, remaining: 0, reset: time.Minute}, want: 10},
		{name: "per minute, reset rounded to the second", obs: limitObs{limit: 600, remaining: 300, reset: 31 * time.Second, slack: time.Second}, want: 10},
		{name: "per second", obs: limitObs{limit: 100, remaining: 90, reset: 100 * time.Millisecond}, want: 100},
		{name: "odd period: the estimate", obs: limitObs{limit: 100, remaining: 0, reset: 10 * time.Second}, want: 10},
		{name: "short coarse reset: the limit per minute fits", obs: limitObs{limit: 50, remaining: 49, reset: time.Second, slack: time.Second}, want: 50.0 / 60},
		{name: "coarse odd period: erring slow", obs: limitObs{limit: 100, remaining: 0, reset: 10 * time.Second, slack: time.Second}, want: 100.0 / 11},
		{name: "full: the default, per minute", obs: limitObs{limit: 60, remaining: 60, reset: 0}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bucket
			tt.obs.kind = kindBucket
			b.learn(&tt.obs, snapshot{}, at(0))
			if diff := cmp.Diff(tt.want, b.rate, cmpApprox); diff != "" {
				t.Errorf("rate (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpApprox = cmp.Comparer(func(a, b float64) bool { return a == b || (a-b)/(a+b) < 1e-9 && (b-a)/(a+b) < 1e-9 })

func TestBucketWakeOrderIsNoShortfall(t *testing.T) {
	t.Parallel()
	var b bucket
	// A window with nothing left; three callers queue for the next one.
	b.learn(&limitObs{kind: kindWindow, limit: 100, remaining: 0, reset: 30 * time.Second, slack: time.Second}, snapshot{}, at(0))
	for range 3 {
		if w, _ := b.take(1, at(0)); w != 31*time.Second {
			t.Fatalf("wait = %v, want 31s", w)
		}
	}
	// They wake together and go out in any order; the server counts them
	// in the order they arrive, which is the order they were sent.
	var snaps []snapshot
	for range 3 {
		snaps = append(snaps, b.send(1, at(31*time.Second)))
	}
	for i, s := range snaps {
		b.learn(&limitObs{kind: kindWindow, limit: 100, remaining: 99 - float64(i), reset: 30 * time.Second, slack: time.Second}, s, at(31*time.Second))
	}
	if b.corrected != 0 || b.level != 97 {
		t.Errorf("level %v, corrected %v; want 97 and 0", b.level, b.corrected)
	}
}
