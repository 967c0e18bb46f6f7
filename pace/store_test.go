package pace

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
)

// memStore is a Store in memory, on a clock of its own: the model a
// store keeps, written out plainly. Tests of other stores compare with the
// same rules.
type memStore struct {
	clock clockwork.Clock

	mu       sync.Mutex
	keys     map[string]*memKey
	reserves []string      // the keys reserved, in order
	reports  []Report      // every report learned, in order
	fail     error         // when set, every call fails with it
	hang     chan struct{} // when set, every call blocks until it closes, ignoring its context
}

type memKey struct {
	requests, tokens memBucket
	blocked          int64
}

// memBucket is one shared bucket: a token bucket refilling at rate, or,
// with window set, a fixed window ending at resetAt.
type memBucket struct {
	limit, level, rate float64
	window, resetAt    int64
	at                 int64
	corrected          float64
	epoch              int64
}

func newMemStore(clock clockwork.Clock) *memStore {
	return &memStore{clock: clock, keys: map[string]*memKey{}}
}

func (s *memStore) Reserve(ctx context.Context, key string, tokens float64, maxWait time.Duration) (Grant, error) {
	if err := s.enter(); err != nil {
		return Grant{}, err
	}
	defer s.mu.Unlock()
	s.reserves = append(s.reserves, key)
	k := s.key(key)
	before := *k // a wait of maxWait or more takes nothing
	now := s.clock.Now().UnixNano()
	var g Grant
	var w time.Duration
	w, g.Requests = k.requests.take(1, now)
	if tokens > 0 {
		var tw time.Duration
		tw, g.Tokens = k.tokens.take(tokens, now)
		w = max(w, tw)
	}
	g.Wait = w
	if b := time.Duration(k.blocked - now); b > w {
		g.Wait, g.RetryAfter = b, true
	}
	if g.Wait >= maxWait {
		*k = before
		return Grant{Wait: g.Wait, RetryAfter: g.RetryAfter}, nil
	}
	return g, nil
}

func (s *memStore) Learn(ctx context.Context, key string, r Report) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.reports = append(s.reports, r)
	k := s.key(key)
	now := s.clock.Now().UnixNano()
	k.requests.learn(&r.Requests, now)
	k.tokens.learn(&r.Tokens, now)
	if r.Block > 0 {
		k.blocked = max(k.blocked, now+int64(r.Block))
	}
	return nil
}

// enter fails, hangs, or locks s.mu.
func (s *memStore) enter() error {
	s.mu.Lock()
	fail, hang := s.fail, s.hang
	if fail == nil && hang == nil {
		return nil
	}
	s.mu.Unlock()
	if hang != nil {
		<-hang
		return errors.New("too late")
	}
	return fail
}

func (s *memStore) key(key string) *memKey {
	k := s.keys[key]
	if k == nil {
		k = new(memKey)
		s.keys[key] = k
	}
	return k
}

func (b *memBucket) advance(now int64) {
	switch {
	case b.limit == 0 || now <= b.at:
		return
	case b.window == 0:
		b.level = math.Min(b.limit, b.level+b.rate*float64(now-b.at)/1e9)
	case now >= b.resetAt:
		n := (now-b.resetAt)/b.window + 1
		b.level = math.Min(math.Min(b.level, 0)+float64(n)*b.limit, b.limit)
		b.resetAt += n * b.window
		b.epoch += n
	}
	b.at = now
}

// take reserves n and returns the wait and the mark: where the bucket
// stands just after the request is sent.
func (b *memBucket) take(n float64, now int64) (time.Duration, Mark) {
	if b.limit == 0 {
		return 0, Mark{}
	}
	b.advance(now)
	b.level -= math.Min(n, b.limit)
	switch {
	case b.level >= 0:
		return 0, Mark{Level: b.level, Corrected: b.corrected, Epoch: b.epoch}
	case b.window == 0:
		return durationOf(-b.level / b.rate), Mark{Corrected: b.corrected, Epoch: b.epoch}
	}
	k := math.Ceil(-b.level / b.limit)
	wait := time.Duration(b.resetAt-now) + time.Duration(k-1)*time.Duration(b.window)
	return wait, Mark{Level: b.level + k*b.limit, Corrected: b.corrected, Epoch: b.epoch + int64(k)}
}

func (b *memBucket) learn(l *Limit, now int64) {
	if l.Limit <= 0 {
		return
	}
	b.advance(now)
	window := int64(l.Window)
	if b.limit != l.Limit || (b.window == 0) != (window == 0) {
		debt := math.Min(b.level, 0)
		*b = memBucket{limit: l.Limit, level: l.Remaining + debt, rate: l.Rate, window: window,
			resetAt: now + int64(l.Reset), at: now, epoch: b.epoch + 1}
		return
	}
	if window != 0 && b.window != 0 && now+int64(l.Reset) > b.resetAt+max(b.window/2, int64(time.Second)) {
		// The server's next window, while this one's end runs late.
		b.level = math.Min(b.level, 0) + b.limit
		b.window, b.resetAt, b.epoch = window, now+int64(l.Reset), b.epoch+1
		if d := b.level - l.Remaining; d > 0 {
			b.level -= d
			b.corrected += d
		}
		return
	}
	if window != 0 {
		if l.Mark.Epoch != 0 && l.Mark.Epoch != b.epoch {
			return // about another window
		}
		b.window, b.resetAt = window, now+int64(l.Reset)
	} else {
		b.rate = l.Rate
	}
	d := b.level - l.Remaining
	if l.Mark.Epoch == b.epoch {
		d = l.Mark.Level - l.Remaining - (b.corrected - l.Mark.Corrected)
	}
	if d > 0 {
		b.level -= d
		b.corrected += d
	}
}

// fleet returns n Transports, each with a Pacer of its own (a process of a
// fleet) sharing store, on fake time.
func fleet(n int, base http.RoundTripper, store Store) ([]*retry.Transport, *[]Event) {
	var mu sync.Mutex
	events := new([]Event)
	p, _ := fakeTime(retry.Policy{})
	var trs []*retry.Transport
	for range n {
		pacer := &Pacer{Store: store, OnWait: func(e Event) {
			mu.Lock()
			*events = append(*events, e)
			mu.Unlock()
		}}
		trs = append(trs, &retry.Transport{Base: base, Policy: p, Pacer: pacer})
	}
	return trs, events
}

func delays(events []Event) []time.Duration {
	var got []time.Duration
	for _, e := range events {
		got = append(got, e.Delay)
	}
	return got
}

// TestPacerStorePacesAFleetAsOne: two processes share a store; what one
// learned paces the other, and their reservations queue together.
func TestPacerStorePacesAFleetAsOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script []http.Header
		want   []time.Duration // the waits of calls 2 to 6, alternating processes
	}{
		{
			name:   "token bucket, empty: one a second across both",
			script: []http.Header{openAIHeaders(10, 0, "10s")},
			want:   []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second},
		},
		{
			name:   "room for two more",
			script: []http.Header{openAIHeaders(10, 2, "8s")},
			want:   []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
		},
		{
			name:   "ietf: q per w",
			script: []http.Header{hdr("RateLimit-Policy", `"p";q=2;w=10`, "RateLimit", `"p";r=0;t=10`)},
			// Two a window, the fleet's callers in their order.
			want: []time.Duration{11 * time.Second, 11 * time.Second, 21 * time.Second,
				21 * time.Second, 31 * time.Second},
		},
		{
			name:   "no headers: nothing learned, no wait",
			script: []http.Header{{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The store's clock stands still: every reservation queues
			// behind the others, as in one instant.
			store := newMemStore(clockwork.NewFakeClock())
			trs, events := fleet(2, &scriptedRT{script: tt.script}, store)
			for i := range 6 {
				if _, err := get(t, trs[i%2], "https://api.example.com/"); err != nil {
					t.Fatal(err)
				}
			}
			// The first call learned from its response; the others waited in
			// the fleet's queue, though the second process saw no header
			// before its first call.
			if diff := cmp.Diff(tt.want, delays(*events)); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if n := len(store.reserves); n != 6 {
				t.Errorf("%d reservations with the store, want 6", n)
			}
		})
	}
}

// TestPacerStoreReport: a report carries the limits the Pacer derived and
// the marks of the reservation back to the store, and a Retry-After blocks
// the other process.
func TestPacerStoreReport(t *testing.T) {
	t.Parallel()
	store := newMemStore(clockwork.NewFakeClock())
	rt := &scriptedRT{script: []http.Header{
		hdr("x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "59", "x-ratelimit-reset-requests", "1s"),
		hdr("Status", "429", "Retry-After", "7"),
		{},
	}}
	trs, events := fleet(2, rt, store)
	trs[0].Policy.MaxAttempts = 1
	for _, tr := range trs[:1] {
		for range 2 {
			_, _ = get(t, tr, "https://api.example.com/")
		}
	}
	if _, err := get(t, trs[1], "https://api.example.com/"); err != nil {
		t.Fatal(err)
	}
	want := []Report{
		{Requests: Limit{Limit: 60, Remaining: 59, Rate: 1}},
		{Block: 7 * time.Second},
	}
	// The second reservation found the bucket the first taught the store.
	want[1].Requests = Limit{}
	if diff := cmp.Diff(want, store.reports); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	wantEvents := []Event{{Attempt: 1, Delay: 7 * time.Second, Host: "api.example.com", RetryAfter: true}}
	if diff := cmp.Diff(wantEvents, *events); diff != "" {
		t.Errorf("the other process's waits (-want +got):\n%s", diff)
	}
}

// TestPacerStoreMarksComeBack: the marks a reservation got return with the
// report of its response, so the store can tell its own count from the
// server's.
func TestPacerStoreMarksComeBack(t *testing.T) {
	t.Parallel()
	store := newMemStore(clockwork.NewFakeClock())
	rt := &scriptedRT{script: []http.Header{openAIHeaders(10, 9, "6s"), openAIHeaders(10, 5, "30s")}}
	trs, _ := fleet(1, rt, store)
	for range 2 {
		if _, err := get(t, trs[0], "https://api.example.com/"); err != nil {
			t.Fatal(err)
		}
	}
	// After the first report the store held 9; the second reservation left
	// 8, the server said 5: 3 more were used elsewhere.
	got := store.reports[1].Requests
	if want := (Mark{Level: 8, Epoch: 1}); got.Mark != want {
		t.Errorf("mark handed back = %+v, want %+v", got.Mark, want)
	}
	if k := store.keys[store.reserves[0]]; k.requests.level != 5 || k.requests.corrected != 3 {
		t.Errorf("store bucket = %+v, want level 5 after a correction of 3", k.requests)
	}
}

// TestPacerStoreKey: every process names a key alike, whatever its seed,
// and the credential is not written to the store.
func TestPacerStoreKey(t *testing.T) {
	t.Parallel()
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1", nil)
	req.Header.Set("Authorization", "Bearer sk-secret")
	a, b := (&Pacer{}).storeKey(req), (&Pacer{}).storeKey(req)
	if a != b || !strings.HasPrefix(a, "api.example.com#") || strings.Contains(a, "secret") {
		t.Errorf("keys %q and %q; want one key naming the host, without the credential", a, b)
	}
	other := req.Clone(context.Background())
	other.Header.Set("Authorization", "Bearer sk-other")
	if k := (&Pacer{}).storeKey(other); k == a {
		t.Errorf("two credentials share the key %q", k)
	}
	custom := &Pacer{Key: func(*http.Request) string { return "org-1" }}
	if k := custom.storeKey(req); k != "org-1" {
		t.Errorf("with Key set, key = %q, want org-1", k)
	}
}

// TestPacerStoreFallsBack: a store that fails, or hangs ignoring its
// context, costs an attempt StoreTimeout at most; the Pacer then paces from
// what it learned itself, reports the fallback, and leaves the store alone
// for a while.
func TestPacerStoreFallsBack(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"fails", "hangs"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			store := newMemStore(clockwork.NewFakeClock())
			rt := &scriptedRT{script: []http.Header{openAIHeaders(10, 0, "10s")}}
			trs, events := fleet(1, rt, store)
			var fallbacks atomic.Int32
			pacer := trs[0].Pacer.(*Pacer)
			pacer.StoreTimeout = 20 * time.Millisecond
			pacer.OnFallback = func(err error) {
				if !strings.Contains(err.Error(), "Pacer.Store") {
					t.Errorf("fallback error %q does not name the store", err)
				}
				fallbacks.Add(1)
			}
			if _, err := get(t, trs[0], "https://api.example.com/"); err != nil {
				t.Fatal(err)
			}
			hang := make(chan struct{})
			defer close(hang)
			store.mu.Lock()
			if mode == "fails" {
				store.fail = errors.New("connection refused")
			} else {
				store.hang = hang
			}
			store.mu.Unlock()
			start := time.Now()
			for range 3 {
				if _, err := get(t, trs[0], "https://api.example.com/"); err != nil {
					t.Fatal(err)
				}
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("three calls with a store that %s took %v", mode, d)
			}
			// The local buckets learned the empty bucket too: one a second.
			want := []time.Duration{time.Second, time.Second, time.Second}
			if diff := cmp.Diff(want, delays(*events)); diff != "" {
				t.Errorf("waits while the store %s (-want +got):\n%s", mode, diff)
			}
			if n := fallbacks.Load(); n != 1 {
				t.Errorf("%d fallbacks reported, want 1: the store is left alone after one", n)
			}
			// Once the store is back and its pause is over, it is asked again.
			store.mu.Lock()
			store.fail, store.hang = nil, nil
			n := len(store.reserves)
			store.mu.Unlock()
			pacer.storeOff.Store(0)
			if _, err := get(t, trs[0], "https://api.example.com/"); err != nil {
				t.Fatal(err)
			}
			store.mu.Lock()
			defer store.mu.Unlock()
			if len(store.reserves) != n+1 {
				t.Errorf("the store was not asked again once back")
			}
		})
	}
}

// badStore grants what no store may.
type badStore struct{ grant Grant }

func (s badStore) Reserve(context.Context, string, float64, time.Duration) (Grant, error) {
	return s.grant, nil
}
func (badStore) Learn(context.Context, string, Report) error { return nil }

func TestPacerStoreHostileGrant(t *testing.T) {
	t.Parallel()
	for name, g := range map[string]Grant{
		"negative wait": {Wait: -time.Second},
		"NaN mark":      {Requests: Mark{Level: math.NaN(), Epoch: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			trs, events := fleet(1, &scriptedRT{script: []http.Header{{}}}, badStore{g})
			var fallbacks atomic.Int32
			trs[0].Pacer.(*Pacer).OnFallback = func(error) { fallbacks.Add(1) }
			if _, err := get(t, trs[0], "https://api.example.com/"); err != nil {
				t.Fatal(err)
			}
			if fallbacks.Load() != 1 || len(*events) != 0 {
				t.Errorf("fallbacks %d, waits %v; want one fallback and no wait", fallbacks.Load(), *events)
			}
		})
	}
	// An hour's wait is believed, and the Deadline then fails the call at once.
	trs, _ := fleet(1, &scriptedRT{script: []http.Header{{}}}, badStore{Grant{Wait: time.Hour}})
	_, err := get(t, trs[0], "https://api.example.com/")
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ReasonDeadline || e.Attempts != 0 {
		t.Errorf("err = %v, want *retry.Error{retry.ReasonDeadline, Attempts: 0}", err)
	}
}

func TestPacerStoreTimeoutNegative(t *testing.T) {
	t.Parallel()
	tr := &retry.Transport{Base: &scriptedRT{script: []http.Header{{}}}, Pacer: &Pacer{StoreTimeout: -1}}
	if _, err := get(t, tr, "https://api.example.com/"); !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("err = %v, want retry.ErrInvalidPolicy", err)
	}
}

// TestPacerStoreKeepsTheDeadline: a store slower than the call's Deadline
// holds the call up only until then, whatever StoreTimeout says. Real
// time: the store's bound is real.
func TestPacerStoreKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	store := newMemStore(clockwork.NewFakeClock())
	hang := make(chan struct{})
	defer close(hang)
	store.hang = hang
	tr := &retry.Transport{Base: &scriptedRT{script: []http.Header{openAIHeaders(10, 9, "1s")}},
		Policy: retry.Policy{Deadline: 300 * time.Millisecond},
		Pacer:  &Pacer{Store: store, StoreTimeout: 10 * time.Second}}
	began := time.Now()
	_, _ = get(t, tr, "https://api.example.com/")
	// The bound is the 300 ms Deadline; a wide margin for a loaded machine.
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("call took %v with a Deadline of 300 ms and a store that hangs", took)
	}
}

// TestPacerStoreCutByTheCallIsNoFailure: a store call cut short by the
// call's own deadline is not the store's failure: the other calls go on
// asking it.
func TestPacerStoreCutByTheCallIsNoFailure(t *testing.T) {
	t.Parallel()
	store := newMemStore(clockwork.NewFakeClock())
	release := make(chan struct{})
	store.hang = release
	var fallbacks atomic.Int32
	p := &Pacer{Store: store, StoreTimeout: 10 * time.Second, OnFallback: func(error) { fallbacks.Add(1) }}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	var tk paceTicket
	wait, _ := p.reserve(&tk, req, nil, 10*time.Millisecond)
	close(release)
	store.mu.Lock()
	store.hang = nil
	granted := len(store.reserves)
	store.mu.Unlock()
	if wait != 0 || granted != 0 {
		t.Errorf("reserve with 10 ms left and a slow store = %v, %d granted by the store; want 0 from the local buckets", wait, granted)
	}
	if n := fallbacks.Load(); n != 0 || !p.storeOn() {
		t.Errorf("%d fallbacks, store on: %v; want none, and the store still asked", n, p.storeOn())
	}
}

// TestPacerStoreRefusedWaitTakesNothing: a caller whose wait would outlast
// its call takes nothing from the shared buckets, so callers that cannot
// wait never lengthen the queue of those who can.
func TestPacerStoreRefusedWaitTakesNothing(t *testing.T) {
	t.Parallel()
	store := newMemStore(clockwork.NewFakeClock())
	trs, events := fleet(1, &scriptedRT{script: []http.Header{openAIHeaders(10, 0, "10s")}}, store)
	tr := trs[0]
	if _, err := get(t, tr, "https://api.example.com/"); err != nil { // learns: empty, one a second
		t.Fatal(err)
	}
	tr.Policy.Deadline = 2500 * time.Millisecond
	var refused int
	for range 6 {
		_, err := get(t, tr, "https://api.example.com/")
		var e *retry.Error
		if errors.As(err, &e) && e.Reason == retry.ReasonDeadline {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	tr.Policy.Deadline = time.Minute
	if _, err := get(t, tr, "https://api.example.com/"); err != nil {
		t.Fatal(err)
	}
	// Two fit in 2.5 s; four would have waited 3 s and more, and took
	// nothing: the next caller waits 3 s, not 7.
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if diff := cmp.Diff(want, delays(*events)); diff != "" || refused != 4 {
		t.Errorf("%d refused, want 4; waits (-want +got):\n%s", refused, diff)
	}
}
