package retryredis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
	"github.com/retrykit/retry/retrytest"
)

// newPacerMini starts a miniredis at epoch0 and returns it with two
// PacerStores on it, two processes of one fleet, each with a client of
// its own.
func newPacerMini(t *testing.T) (*miniredis.Miniredis, [2]*PacerStore) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(epoch0)
	var stores [2]*PacerStore
	for i := range stores {
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		stores[i] = NewPacerStore(rdb, "fleet")
	}
	return m, stores
}

// pacerStep is one call in a script: move the server's clock, then
// reserve (learn nil) or learn, as one of two processes.
type pacerStep struct {
	advance time.Duration
	process int
	tokens  float64      // for a reservation
	learn   *pace.Report // nil: a reservation
	want    pace.Grant   // of a reservation
}

// bucketOf is a token bucket's report: limit, remaining, refilling at rate
// a second.
func bucketOf(limit, remaining, rate float64, mark pace.Mark) pace.Limit {
	return pace.Limit{Limit: limit, Remaining: remaining, Rate: rate, Mark: mark}
}

// windowOf is a fixed window's report.
func windowOf(limit, remaining float64, window, reset time.Duration, mark pace.Mark) pace.Limit {
	return pace.Limit{Limit: limit, Remaining: remaining, Window: window, Reset: reset, Mark: mark}
}

func requests(l pace.Limit) *pace.Report { return &pace.Report{Requests: l} }

// grant is a reservation's expected answer, on requests only.
func grant(wait time.Duration, level, corrected float64, epoch int64) pace.Grant {
	return pace.Grant{Wait: wait, Requests: pace.Mark{Level: level, Corrected: corrected, Epoch: epoch}}
}

var noMark pace.Mark

// pacerCases are the behaviours of the store model, as steps; the
// integration test plays them on a real Redis too, where the clock cannot
// be set, so their times move only by advance.
var pacerCases = []struct {
	name  string
	steps []pacerStep
}{
	{
		name:  "a key nobody learned grants at once",
		steps: []pacerStep{{tokens: 500}, {process: 1}},
	},
	{
		name: "an empty token bucket: one a second, first come first served across processes",
		steps: []pacerStep{
			{learn: requests(bucketOf(10, 0, 1, noMark))},
			{process: 0, want: grant(time.Second, 0, 0, 1)},
			{process: 1, want: grant(2*time.Second, 0, 0, 1)},
			{process: 0, want: grant(3*time.Second, 0, 0, 1)},
			{advance: time.Second, process: 1, want: grant(3*time.Second, 0, 0, 1)},
			{advance: 10 * time.Second, process: 0, want: grant(0, 6, 0, 1)}, // refilled to 7
		},
	},
	{
		name: "room for two, then the queue",
		steps: []pacerStep{
			{learn: requests(bucketOf(10, 2, 4, noMark))},
			{process: 0, want: grant(0, 1, 0, 1)},
			{process: 1, want: grant(0, 0, 0, 1)},
			{process: 0, want: grant(250*time.Millisecond, 0, 0, 1)},
		},
	},
	{
		name: "a fixed window: wait for its end, reservations carried into later windows",
		steps: []pacerStep{
			{learn: requests(windowOf(3, 1, time.Minute, 10*time.Second, noMark))},
			{process: 0, want: grant(0, 0, 0, 1)},
			{process: 1, want: grant(10*time.Second, 2, 0, 2)},
			{process: 0, want: grant(10*time.Second, 1, 0, 2)},
			{process: 1, want: grant(10*time.Second, 0, 0, 2)},
			{process: 0, want: grant(70*time.Second, 2, 0, 3)},
			// The window ends: its quota pays what was carried.
			{advance: 10 * time.Second, process: 1, want: grant(time.Minute, 1, 0, 3)},
		},
	},
	{
		// The bucket's end, read from whole seconds, runs late; a
		// response from the server's next window begins it, and what it
		// says is left is compared with the whole quota.
		name: "the server's next window while the end runs late",
		steps: []pacerStep{
			{learn: requests(windowOf(10, 3, time.Minute, time.Second, noMark))},
			{learn: requests(windowOf(10, 9, time.Minute, time.Minute, noMark))},
			{want: grant(0, 8, 1, 2)}, {want: grant(0, 7, 1, 2)}, {want: grant(0, 6, 1, 2)},
			{want: grant(0, 5, 1, 2)}, {want: grant(0, 4, 1, 2)}, {want: grant(0, 3, 1, 2)},
			{want: grant(0, 2, 1, 2)}, {want: grant(0, 1, 1, 2)}, {want: grant(0, 0, 1, 2)},
			{want: grant(time.Minute, 9, 1, 3)},
		},
	},
	{
		// A window of a second: a reset a second later is the rounding of
		// whole-second resets, not the next window.
		name: "a short window's wobble is no new window",
		steps: []pacerStep{
			{learn: requests(windowOf(10, 5, time.Second, 500*time.Millisecond, noMark))},
			{learn: requests(windowOf(10, 9, time.Second, 1400*time.Millisecond, noMark))},
			{want: grant(0, 4, 0, 1)},
		},
	},
	{
		name: "a fixed window refills whole at its end",
		steps: []pacerStep{
			{learn: requests(windowOf(3, 0, time.Minute, 5*time.Second, noMark))},
			{advance: 5 * time.Second, process: 1, want: grant(0, 2, 0, 2)},
			{advance: 2 * time.Minute, process: 0, want: grant(0, 2, 0, 4)}, // two windows later
		},
	},
	{
		name: "a new limit starts afresh but keeps the queue's debt",
		steps: []pacerStep{
			{learn: requests(bucketOf(10, 0, 1, noMark))},
			{process: 0, want: grant(time.Second, 0, 0, 1)},
			{process: 1, want: grant(2*time.Second, 0, 0, 1)},
			{learn: requests(bucketOf(20, 5, 2, noMark))},
			{process: 0, want: grant(0, 2, 0, 2)},
		},
	},
	{
		name: "a bucket that becomes a window starts afresh",
		steps: []pacerStep{
			{learn: requests(bucketOf(10, 5, 1, noMark))},
			{process: 0, want: grant(0, 4, 0, 1)},
			{learn: requests(windowOf(10, 1, time.Minute, time.Minute, noMark))},
			{process: 1, want: grant(0, 0, 0, 2)},
			{process: 1, want: grant(time.Minute, 9, 0, 3)},
		},
	},
	{
		name: "marks correct the bucket down by what others used, never twice, never up",
		steps: []pacerStep{
			{learn: requests(bucketOf(10, 9, 1, noMark))},
			{process: 0, want: grant(0, 8, 0, 1)},
			{process: 1, want: grant(0, 7, 0, 1)},
			// Process 0's response: 5 left where its mark said 8: 3 used elsewhere.
			{process: 0, learn: requests(bucketOf(10, 5, 1, pace.Mark{Level: 8, Epoch: 1}))},
			// Process 1's: 4 where its mark said 7; the 3 are already counted.
			{process: 1, learn: requests(bucketOf(10, 4, 1, pace.Mark{Level: 7, Epoch: 1}))},
			{process: 0, want: grant(0, 3, 3, 1)},
			// A server that says more than the mark does not move the bucket up.
			{process: 1, learn: requests(bucketOf(10, 9, 1, pace.Mark{Level: 3, Corrected: 3, Epoch: 1}))},
			{process: 1, want: grant(0, 2, 3, 1)},
			// Without a mark, the bucket's level is compared.
			{learn: requests(bucketOf(10, 0, 1, noMark))},
			{process: 0, want: grant(time.Second, 0, 5, 1)},
		},
	},
	{
		name: "a window's mark from another window is ignored",
		steps: []pacerStep{
			{learn: requests(windowOf(3, 3, time.Minute, 10*time.Second, noMark))},
			{process: 0, want: grant(0, 2, 0, 1)},
			{advance: 10 * time.Second, process: 0,
				learn: requests(windowOf(3, 0, time.Minute, time.Minute, pace.Mark{Level: 2, Epoch: 1}))},
			{process: 1, want: grant(0, 2, 0, 2)},
			// A mark of this window is believed: 1 used elsewhere.
			{learn: requests(windowOf(3, 1, time.Minute, time.Minute, pace.Mark{Level: 2, Epoch: 2}))},
			{process: 0, want: grant(0, 0, 1, 2)},
		},
	},
	{
		name: "a Retry-After holds every process, longer blocks only",
		steps: []pacerStep{
			{learn: &pace.Report{Block: 7 * time.Second}},
			{process: 1, want: pace.Grant{Wait: 7 * time.Second, RetryAfter: true}},
			{advance: 3 * time.Second, learn: &pace.Report{Block: time.Second}},
			{process: 0, want: pace.Grant{Wait: 4 * time.Second, RetryAfter: true}},
			{advance: 4 * time.Second, process: 1},
		},
	},
	{
		name: "a queue longer than the block is not the block's",
		steps: []pacerStep{
			{learn: &pace.Report{Requests: bucketOf(10, 0, 0.1, noMark), Block: 5 * time.Second}},
			{process: 0, want: grant(10*time.Second, 0, 0, 1)},
		},
	},
	{
		name: "tokens are a bucket of their own; a request never takes more than the limit",
		steps: []pacerStep{
			{learn: &pace.Report{Requests: bucketOf(100, 100, 10, noMark), Tokens: bucketOf(1000, 500, 100, noMark)}},
			{process: 0, tokens: 400, want: pace.Grant{
				Requests: pace.Mark{Level: 99, Epoch: 1}, Tokens: pace.Mark{Level: 100, Epoch: 1}}},
			{process: 1, tokens: 400, want: pace.Grant{Wait: 3 * time.Second,
				Requests: pace.Mark{Level: 98, Epoch: 1}, Tokens: pace.Mark{Epoch: 1}}},
			{process: 0, want: grant(0, 97, 0, 1)}, // no tokens: no wait for them
			{process: 1, tokens: 5000, want: pace.Grant{Wait: 13 * time.Second,
				Requests: pace.Mark{Level: 96, Epoch: 1}, Tokens: pace.Mark{Epoch: 1}}},
		},
	},
}

func TestPacerStoreModel(t *testing.T) {
	t.Parallel()
	for _, tt := range pacerCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, stores := newPacerMini(t)
			now := epoch0
			for i, st := range tt.steps {
				now = now.Add(st.advance)
				m.SetTime(now)
				playStep(t, i, stores[st.process], "api.example.com#0123", st, nil)
			}
		})
	}
}

// playStep plays st on store and checks a reservation's grant.
func playStep(t *testing.T, i int, store *PacerStore, key string, st pacerStep, match func(got, want pace.Grant) bool) {
	t.Helper()
	ctx := context.Background()
	if st.learn != nil {
		if err := store.Learn(ctx, key, *st.learn); err != nil {
			t.Fatalf("step %d: Learn: %v", i, err)
		}
		return
	}
	got, err := store.Reserve(ctx, key, st.tokens, forever)
	if err != nil {
		t.Fatalf("step %d: Reserve: %v", i, err)
	}
	if match == nil && got != st.want || match != nil && !match(got, st.want) {
		t.Errorf("step %d: process %d got grant\n\t%+v\nwant\n\t%+v", i, st.process, got, st.want)
	}
}

// TestPacerStoreTTL: each call sets the TTL, which a running Retry-After
// or a long queue lengthens; an idle key expires.
func TestPacerStoreTTL(t *testing.T) {
	t.Parallel()
	m, stores := newPacerMini(t)
	ctx := context.Background()
	s := stores[0]
	s.TTL = 10 * time.Second
	key := s.Key("k")
	if _, err := s.Reserve(ctx, "k", 0, forever); err != nil || m.Exists(key) {
		t.Errorf("a reservation on a key nobody learned: %v, exists %v; want no key written", err, m.Exists(key))
	}
	check := func(what string, want time.Duration) {
		t.Helper()
		if got := m.TTL(key); got != want {
			t.Errorf("TTL after %s = %v, want %v", what, got, want)
		}
	}
	if err := s.Learn(ctx, "k", *requests(bucketOf(10, 5, 1, noMark))); err != nil {
		t.Fatal(err)
	}
	check("a report", 10*time.Second)
	m.FastForward(6 * time.Second)
	if _, err := s.Reserve(ctx, "k", 0, forever); err != nil {
		t.Fatal(err)
	}
	check("a reservation, 6s later", 10*time.Second)
	if err := s.Learn(ctx, "k", pace.Report{Block: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	check("a Retry-After of 30s", 30*time.Second)
	if err := s.Learn(ctx, "k", *requests(bucketOf(10, 5, 1, noMark))); err != nil {
		t.Fatal(err)
	}
	check("a report during the block", 30*time.Second)
	m.SetTime(epoch0.Add(25 * time.Second))
	if _, err := s.Reserve(ctx, "k", 0, forever); err != nil {
		t.Fatal(err)
	}
	check("a reservation 5s before the block ends", 10*time.Second)
	// A queue 20 s long outlives a TTL of 10 s.
	if err := s.Learn(ctx, "k", *requests(bucketOf(20, 0, 1, noMark))); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := s.Reserve(ctx, "k", 0, forever); err != nil {
			t.Fatal(err)
		}
	}
	check("a queue of 20s", 20*time.Second)
	m.FastForward(20 * time.Second)
	if m.Exists(key) {
		t.Errorf("key %q still there past its TTL", key)
	}
}

// TestRedisPacerStore plays the table's cases on a real Redis, through a
// Client and a Ring, up to their first step of the clock: the server's
// clock runs on meanwhile, so buckets refill a little between calls, and
// grants are compared within a margin.
func TestRedisPacerStore(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": rdb.Options().Addr}})
	t.Cleanup(func() { ring.Close() })
	for _, client := range []struct {
		name string
		c    redis.Scripter
	}{{"client", rdb}, {"ring", ring}} {
		for _, tt := range pacerCases {
			t.Run(client.name+"/"+tt.name, func(t *testing.T) {
				stores := [2]*PacerStore{NewPacerStore(client.c, uniqueName(t)), nil}
				stores[1] = NewPacerStore(rdb, stores[0].Name)
				t.Cleanup(func() { rdb.Del(context.Background(), stores[0].Key("k")) })
				for i, st := range tt.steps {
					if st.advance != 0 {
						break
					}
					playStep(t, i, stores[st.process], "k", st, nearGrant)
				}
			})
		}
	}
}

// nearGrant reports whether a grant from a real Redis, whose clock runs
// between calls, is the model's: a wait up to a second shorter, marks up to
// half a unit higher, the rest equal.
func nearGrant(got, want pace.Grant) bool {
	near := func(got, want pace.Mark) bool {
		return got.Epoch == want.Epoch && got.Corrected >= want.Corrected && got.Corrected <= want.Corrected+0.5 &&
			got.Level >= want.Level && got.Level <= want.Level+0.5
	}
	return got.Wait <= want.Wait && got.Wait >= want.Wait-time.Second && got.RetryAfter == want.RetryAfter &&
		near(got.Requests, want.Requests) && near(got.Tokens, want.Tokens)
}

// TestRedisPacerStoreBadState: a flushed script, a key of another type,
// and the TTL, on a real Redis.
func TestRedisPacerStoreBadState(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	ctx := context.Background()
	store := NewPacerStore(rdb, uniqueName(t))
	store.TTL = time.Minute
	t.Cleanup(func() { rdb.Del(ctx, store.Key("k")) })
	if err := store.Learn(ctx, "k", pace.Report{Requests: bucketOf(10, 5, 1, noMark), Block: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, store.Key("k")).Result(); err != nil || ttl <= time.Minute || ttl > 2*time.Minute {
		t.Errorf("TTL %v, %v; want the Retry-After's 2m", ttl, err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g, err := store.Reserve(ctx, "k", 0, forever)
	if err != nil || !g.RetryAfter || g.Wait <= time.Minute || g.Wait > 2*time.Minute {
		t.Errorf("after SCRIPT FLUSH: %+v, %v; want the Retry-After's wait", g, err)
	}
	if err := rdb.Set(ctx, store.Key("k"), "a string", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if g, err := store.Reserve(ctx, "k", 0, forever); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a key holding a string: %+v, %v; want a WRONGTYPE error", g, err)
	}
}

// TestRedisPacersShareBuckets: two processes, each with a Pacer of its
// own behind a real Transport, share a PacerStore on a real Redis. Only
// the first sees the server's headers before it is paced, yet the second
// waits behind the first's reservations, one a second, as the server's
// empty bucket allows.
func TestRedisPacersShareBuckets(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	name := uniqueName(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("x-ratelimit-limit-requests", "10")
		h.Set("x-ratelimit-remaining-requests", "0")
		h.Set("x-ratelimit-reset-requests", "10s") // refills at one a second
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { rdb.Del(context.Background(), NewPacerStore(rdb, name).Key(srv.Listener.Addr().String())) })
	var fallbacks atomic.Int32
	process := func() (*http.Client, *retrytest.FakeTime) {
		ft := retrytest.NewFakeTime()
		pacer := &pace.Pacer{Store: NewPacerStore(rdb, name), StoreTimeout: 2 * time.Second,
			OnFallback: func(err error) { t.Log(err); fallbacks.Add(1) }}
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		tr := &retry.Transport{Base: base, Pacer: pacer,
			Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand, Deadline: time.Minute}}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}, ft
	}
	a, aTime := process()
	b, bTime := process()
	for i, c := range []*http.Client{a, b, a, b} {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		resp.Body.Close()
	}
	// a's first call found nothing to wait for and taught the store; then
	// each call queued behind the others: about 1s, 2s, 3s.
	waits := [][]time.Duration{aTime.Sleeps(), bTime.Sleeps()}
	if len(waits[0]) != 1 || len(waits[1]) != 2 {
		t.Fatalf("waits %v; want one for the first process, two for the second", waits)
	}
	for i, got := range []time.Duration{waits[1][0], waits[0][0], waits[1][1]} {
		want := time.Duration(i+1) * time.Second
		if got > want || got < want-500*time.Millisecond {
			t.Errorf("call %d waited %v, want about %v", i+2, got, want)
		}
	}
	if n := fallbacks.Load(); n != 0 {
		t.Errorf("%d fallbacks from a Redis that is up", n)
	}
}
