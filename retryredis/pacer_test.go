package retryredis

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
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
	tokens  float64           // for a reservation
	learn   *retry.PaceReport // nil: a reservation
	want    retry.PaceGrant   // of a reservation
}

// bucketOf is a token bucket's report: limit, remaining, refilling at rate
// a second.
func bucketOf(limit, remaining, rate float64, mark retry.PaceMark) retry.PaceLimit {
	return retry.PaceLimit{Limit: limit, Remaining: remaining, Rate: rate, Mark: mark}
}

// windowOf is a fixed window's report.
func windowOf(limit, remaining float64, window, reset time.Duration, mark retry.PaceMark) retry.PaceLimit {
	return retry.PaceLimit{Limit: limit, Remaining: remaining, Window: window, Reset: reset, Mark: mark}
}

func requests(l retry.PaceLimit) *retry.PaceReport { return &retry.PaceReport{Requests: l} }

// grant is a reservation's expected answer, on requests only.
func grant(wait time.Duration, level, corrected float64, epoch int64) retry.PaceGrant {
	return retry.PaceGrant{Wait: wait, Requests: retry.PaceMark{Level: level, Corrected: corrected, Epoch: epoch}}
}

var noMark retry.PaceMark

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
			{process: 0, learn: requests(bucketOf(10, 5, 1, retry.PaceMark{Level: 8, Epoch: 1}))},
			// Process 1's: 4 where its mark said 7; the 3 are already counted.
			{process: 1, learn: requests(bucketOf(10, 4, 1, retry.PaceMark{Level: 7, Epoch: 1}))},
			{process: 0, want: grant(0, 3, 3, 1)},
			// A server that says more than the mark does not move the bucket up.
			{process: 1, learn: requests(bucketOf(10, 9, 1, retry.PaceMark{Level: 3, Corrected: 3, Epoch: 1}))},
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
				learn: requests(windowOf(3, 0, time.Minute, time.Minute, retry.PaceMark{Level: 2, Epoch: 1}))},
			{process: 1, want: grant(0, 2, 0, 2)},
			// A mark of this window is believed: 1 used elsewhere.
			{learn: requests(windowOf(3, 1, time.Minute, time.Minute, retry.PaceMark{Level: 2, Epoch: 2}))},
			{process: 0, want: grant(0, 0, 1, 2)},
		},
	},
	{
		name: "a Retry-After holds every process, longer blocks only",
		steps: []pacerStep{
			{learn: &retry.PaceReport{Block: 7 * time.Second}},
			{process: 1, want: retry.PaceGrant{Wait: 7 * time.Second, RetryAfter: true}},
			{advance: 3 * time.Second, learn: &retry.PaceReport{Block: time.Second}},
			{process: 0, want: retry.PaceGrant{Wait: 4 * time.Second, RetryAfter: true}},
			{advance: 4 * time.Second, process: 1},
		},
	},
	{
		name: "a queue longer than the block is not the block's",
		steps: []pacerStep{
			{learn: &retry.PaceReport{Requests: bucketOf(10, 0, 0.1, noMark), Block: 5 * time.Second}},
			{process: 0, want: grant(10*time.Second, 0, 0, 1)},
		},
	},
	{
		name: "tokens are a bucket of their own; a request never takes more than the limit",
		steps: []pacerStep{
			{learn: &retry.PaceReport{Requests: bucketOf(100, 100, 10, noMark), Tokens: bucketOf(1000, 500, 100, noMark)}},
			{process: 0, tokens: 400, want: retry.PaceGrant{
				Requests: retry.PaceMark{Level: 99, Epoch: 1}, Tokens: retry.PaceMark{Level: 100, Epoch: 1}}},
			{process: 1, tokens: 400, want: retry.PaceGrant{Wait: 3 * time.Second,
				Requests: retry.PaceMark{Level: 98, Epoch: 1}, Tokens: retry.PaceMark{Epoch: 1}}},
			{process: 0, want: grant(0, 97, 0, 1)}, // no tokens: no wait for them
			{process: 1, tokens: 5000, want: retry.PaceGrant{Wait: 13 * time.Second,
				Requests: retry.PaceMark{Level: 96, Epoch: 1}, Tokens: retry.PaceMark{Epoch: 1}}},
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
				playStep(t, i, stores[st.process], "api.example.com#0123", st)
			}
		})
	}
}

// playStep plays st on store and checks a reservation's grant.
func playStep(t *testing.T, i int, store *PacerStore, key string, st pacerStep) {
	t.Helper()
	ctx := context.Background()
	if st.learn != nil {
		if err := store.Learn(ctx, key, *st.learn); err != nil {
			t.Fatalf("step %d: Learn: %v", i, err)
		}
		return
	}
	got, err := store.Reserve(ctx, key, st.tokens)
	if err != nil {
		t.Fatalf("step %d: Reserve: %v", i, err)
	}
	if got != st.want {
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
	if _, err := s.Reserve(ctx, "k", 0); err != nil || m.Exists(key) {
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
	if _, err := s.Reserve(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	check("a reservation, 6s later", 10*time.Second)
	if err := s.Learn(ctx, "k", retry.PaceReport{Block: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	check("a Retry-After of 30s", 30*time.Second)
	if err := s.Learn(ctx, "k", *requests(bucketOf(10, 5, 1, noMark))); err != nil {
		t.Fatal(err)
	}
	check("a report during the block", 30*time.Second)
	m.SetTime(epoch0.Add(25 * time.Second))
	if _, err := s.Reserve(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	check("a reservation 5s before the block ends", 10*time.Second)
	// A queue 20 s long outlives a TTL of 10 s.
	if err := s.Learn(ctx, "k", *requests(bucketOf(20, 0, 1, noMark))); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := s.Reserve(ctx, "k", 0); err != nil {
			t.Fatal(err)
		}
	}
	check("a queue of 20s", 20*time.Second)
	m.FastForward(20 * time.Second)
	if m.Exists(key) {
		t.Errorf("key %q still there past its TTL", key)
	}
}
