package retryredis

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// epoch0 is when the miniredis tests begin, by the server's clock.
var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newMini starts a miniredis at epoch0 and a store on it.
func newMini(t *testing.T) (*miniredis.Miniredis, *BudgetStore) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(epoch0)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return m, NewBudgetStore(rdb, "svc")
}

// rule is a Budget's rule, for settlements: 0.5 per first attempt and a
// floor of 4 in a window of 10 s.
func rule(deposits, want int64) retry.BudgetSettlement {
	return retry.BudgetSettlement{Deposits: deposits, Want: want, Ratio: 0.5, MinPerSecond: 0.4, Window: 10 * time.Second}
}

// settleStep is one settlement in a script: move the server's clock, then
// settle as one of several processes.
type settleStep struct {
	advance  time.Duration
	process  int // which process settles; its last lease is handed back whole if unspent
	deposits int64
	want     int64
	spent    int64 // of the process's last lease, before this settlement
	grant    int64 // wanted from the store
}

func TestBudgetStoreRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []settleStep
	}{
		{
			name: "the floor is the fleet's, not each process's",
			steps: []settleStep{
				{process: 0, want: 3, grant: 3},
				{process: 1, want: 3, grant: 1},
				{process: 2, want: 3, grant: 0},
			},
		},
		{
			name: "deposits of every process add to it",
			steps: []settleStep{
				{process: 0, deposits: 4, want: 10, grant: 6}, // 0.5*4 + 4
				{process: 1, deposits: 6, want: 10, grant: 3},
				{process: 0, want: 10, spent: 6, grant: 0},
			},
		},
		{
			name: "what is not spent of a lease goes back",
			steps: []settleStep{
				{process: 0, want: 4, grant: 4},
				{process: 1, want: 4, grant: 0},
				{advance: time.Second, process: 0, want: 4, spent: 1, grant: 3},
				{process: 1, want: 4, grant: 0},
			},
		},
		{
			name: "what is handed back after the lease left the window is not counted",
			steps: []settleStep{
				{process: 0, want: 4, grant: 4},
				{advance: 10 * time.Second, process: 1, want: 4, grant: 4},
				{process: 0, want: 4, grant: 0}, // hands back 4 of a slice long gone
			},
		},
		{
			name: "an idle spell of several slices forgets only what left the window",
			steps: []settleStep{
				{process: 0, deposits: 8, want: 8, grant: 8},
				{advance: 3 * time.Second, process: 1, want: 8, grant: 0},
				{advance: 7 * time.Second, process: 1, want: 8, grant: 4},
			},
		},
		{
			name: "a server clock that goes back counts in the latest slice",
			steps: []settleStep{
				{advance: 5 * time.Second, process: 0, want: 4, grant: 4},
				{advance: -5 * time.Second, process: 1, want: 4, grant: 0},
				{advance: 14 * time.Second, process: 1, want: 4, grant: 0}, // 9 s after the latest
				{advance: time.Second, process: 1, want: 4, grant: 4},
			},
		},
		{
			name: "the window slides a tenth at a time",
			steps: []settleStep{
				{process: 0, deposits: 8, want: 8, grant: 8},
				{advance: 5 * time.Second, process: 1, deposits: 4, want: 8, grant: 2},
				{advance: 5 * time.Second, process: 1, want: 8, spent: 2, grant: 4}, // 0.5*4 + 4 - 2
				{advance: 5 * time.Second, process: 1, want: 8, spent: 4, grant: 0},
				{advance: 5 * time.Second, process: 1, want: 8, grant: 4},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, store := newMini(t)
			now := epoch0
			last := map[int]retry.BudgetLease{}
			for i, st := range tt.steps {
				now = now.Add(st.advance)
				m.SetTime(now)
				r := rule(st.deposits, st.want)
				if l, ok := last[st.process]; ok {
					r.Unspent, r.Epoch = l.Retries-st.spent, l.Epoch
				}
				got, err := store.Settle(context.Background(), r)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got.Retries != st.grant {
					t.Errorf("step %d: process %d granted %d, want %d", i, st.process, got.Retries, st.grant)
				}
				last[st.process] = got
			}
		})
	}
}

func TestBudgetStoreKey(t *testing.T) {
	t.Parallel()
	m, store := newMini(t)
	if _, err := store.Settle(context.Background(), rule(1, 1)); err != nil {
		t.Fatal(err)
	}
	const key = "retry:budget:{svc}"
	if got := store.Key(); got != key {
		t.Errorf("Key() = %q, want %q", got, key)
	}
	if got := m.TTL(key); got != 20*time.Second {
		t.Errorf("TTL = %v, want two windows, 20s", got)
	}
	m.FastForward(20 * time.Second) // abandoned: the key goes
	if m.Exists(key) {
		t.Errorf("key %q still there two windows after its last use", key)
	}
	other := &BudgetStore{Client: store.Client, Name: "svc", Prefix: "app:"}
	if got := other.Key(); got != "app:{svc}" {
		t.Errorf("Key() with a prefix = %q, want %q", got, "app:{svc}")
	}
}

// TestBudgetStoreBadState: a flushed script is loaded again; a key of
// another type or garbage in the hash never panics, never over-grants.
func TestBudgetStoreBadState(t *testing.T) {
	t.Parallel()
	m, store := newMini(t)
	ctx := context.Background()
	if _, err := store.Settle(ctx, rule(0, 1)); err != nil {
		t.Fatal(err)
	}
	m.FlushAll()
	if err := store.Client.(*redis.Client).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Settle(ctx, rule(0, 2)); err != nil || got.Retries != 2 {
		t.Errorf("after SCRIPT FLUSH: %+v, %v; want a lease of 2", got, err)
	}

	m.FlushAll()
	if err := m.Set(store.Key(), "a string"); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Settle(ctx, rule(0, 2)); err == nil {
		t.Errorf("a key holding a string: %+v, want an error", got)
	}

	m.FlushAll()
	// Sums that would make room, and slot 1 claiming the slice before the
	// present with deposits that would earn a fortune.
	s := epoch0.Unix() - 1
	m.HSet(store.Key(), "L", "x", "D", "-5", "R", "-1e9",
		"t0", "x", "t1", strconv.FormatInt(s, 10), "d1", "1e400", "r1", "-1e9", "t2", "", "zz", "9")
	got, err := store.Settle(ctx, rule(0, 10))
	if err != nil || got.Retries > 4 {
		t.Errorf("a hash of garbage: %+v, %v; want at most the floor of 4", got, err)
	}
}

// oddScripter answers every script with a fixed reply or error.
type oddScripter struct {
	redis.Scripter // nil: the methods below are all that is called
	val            any
	err            error
}

func (o oddScripter) cmd(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetVal(o.val)
	c.SetErr(o.err)
	return c
}

func (o oddScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return o.cmd(ctx)
}

func (o oddScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return o.cmd(ctx)
}

func TestBudgetStoreGarbage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		client redis.Scripter
	}{
		{name: "nil client"},
		{name: "error", client: oddScripter{err: errors.New("READONLY")}},
		{name: "NOSCRIPT forever", client: oddScripter{err: redis.ErrNoScript}},
		{name: "a string", client: oddScripter{val: "OK"}},
		{name: "nil", client: oddScripter{}},
		{name: "one number", client: oddScripter{val: []any{int64(3)}}},
		{name: "three numbers", client: oddScripter{val: []any{int64(1), int64(2), int64(3)}}},
		{name: "strings", client: oddScripter{val: []any{"a", "b"}}},
		{name: "negative grant", client: oddScripter{val: []any{int64(-1), int64(2)}}},
		{name: "more than asked", client: oddScripter{val: []any{int64(6), int64(2)}}},
		{name: "nested", client: oddScripter{val: []any{[]any{int64(1)}, int64(2)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &BudgetStore{Client: tt.client, Name: "svc"}
			got, err := store.Settle(context.Background(), rule(0, 5))
			if err == nil {
				t.Errorf("Settle = %+v, nil; want an error", got)
			}
		})
	}
	var nilStore *BudgetStore
	if _, err := nilStore.Settle(context.Background(), rule(0, 1)); err == nil {
		t.Error("Settle on a nil *BudgetStore: want an error")
	}
}

// TestBudgetThroughStore: Budgets in one process stand for processes of a
// fleet; they share the floor through miniredis, then fall back to their
// own windows when it closes, and come back when it answers again.
func TestBudgetThroughStore(t *testing.T) {
	t.Parallel()
	m, store := newMini(t)
	// Settlements run in goroutines of the Budget's own.
	var fallbacks atomic.Int32
	onFallback := func(error) { fallbacks.Add(1) }
	budget := func() *retry.Budget {
		// A StoreTimeout that a busy machine cannot miss: the first call
		// dials and loads the script.
		return &retry.Budget{Ratio: 0.5, MinPerSecond: 0.4, Window: 10 * time.Second, Store: store, Lease: 2,
			StoreTimeout: time.Second, OnFallback: onFallback}
	}
	a, b := budget(), budget()
	granted := 0
	for range 10 {
		for _, x := range []*retry.Budget{a, b} {
			if x.Withdraw() {
				granted++
			}
		}
	}
	if granted != 4 || fallbacks.Load() != 0 {
		t.Errorf("%d retries granted to two processes, %d fallbacks; want the fleet's floor of 4, 0", granted, fallbacks.Load())
	}

	m.Close()
	c := &retry.Budget{Ratio: 0.5, MinPerSecond: 0.4, Window: 10 * time.Second, Store: store,
		StoreTimeout: time.Second, OnFallback: onFallback}
	began := time.Now()
	local := 0
	for range 10 {
		if c.Withdraw() {
			local++
		}
	}
	if d := time.Since(began); d > 5*time.Second { // the bound is StoreTimeout
		t.Errorf("10 retries took %v with Redis down", d)
	}
	// A retry may stop waiting just before the failed settlement reports.
	for end := time.Now().Add(5 * time.Second); fallbacks.Load() == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if local != 4 || fallbacks.Load() != 1 {
		t.Errorf("with Redis down: %d retries by the local window, %d fallbacks; want 4, 1", local, fallbacks.Load())
	}
}

// TestBudgetBackToRedis: a Budget that fell back while Redis was down
// returns to the shared budget when Redis answers again, asked in the
// background by its first attempts.
func TestBudgetBackToRedis(t *testing.T) {
	t.Parallel()
	m, redisStore := newMini(t)
	store := &countingStore{BudgetStore: redisStore}
	var fallbacks atomic.Int32
	b := &retry.Budget{Ratio: 0.5, MinPerSecond: 0.4, Window: 10 * time.Second, Store: store,
		StoreTimeout: time.Second, OnFallback: func(error) { fallbacks.Add(1) }}
	m.Close()
	b.Withdraw() // fails over to the local window
	for end := time.Now().Add(5 * time.Second); fallbacks.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no fallback 5 s after Redis closed")
		}
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	// Deposits ask Redis again once SettleEvery has passed.
	for end := time.Now().Add(5 * time.Second); store.ok.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the Budget did not settle with Redis 5 s after it came back")
		}
		b.Deposit()
	}
	// Back on the shared budget: a second process sees what this one took.
	other := &retry.Budget{Ratio: 0.5, MinPerSecond: 0.4, Window: 10 * time.Second, Store: redisStore,
		StoreTimeout: time.Second}
	granted := 0
	for range 20 {
		if b.Withdraw() {
			granted++
		}
		if other.Withdraw() {
			granted++
		}
	}
	// The floor of 4, and 0.5 for each deposit the Budget settled; a
	// Budget still on its own window would add up to 3 of its own.
	deposits := mustAtoi(t, m.HGet(redisStore.Key(), "D"))
	if granted > 4+deposits/2 {
		t.Errorf("%d retries granted to two processes after Redis came back; the shared rule allows %d",
			granted, 4+deposits/2)
	}
	if granted == 0 {
		t.Error("no retry granted after Redis came back")
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a count: %v", s, err)
	}
	return n
}
