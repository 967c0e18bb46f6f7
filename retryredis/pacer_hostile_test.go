package retryredis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

func TestPacerStoreKey(t *testing.T) {
	t.Parallel()
	store := NewPacerStore(nil, "fleet")
	long := strings.Repeat("a", 1<<20)
	tests := []struct {
		name, key, want string
	}{
		{name: "host and digest", key: "api.example.com#0123abcd", want: "retry:pacer:{fleet:api.example.com#0123abcd}"},
		{name: "a port", key: "localhost:8080", want: "retry:pacer:{fleet:localhost:8080}"},
		{name: "empty", key: "", want: "retry:pacer:{fleet:}"},
		{name: "braces", key: "a}b{c", want: "retry:pacer:{fleet:" + digest("a}b{c") + "}"},
		{name: "newline", key: "a\r\nDEL x", want: "retry:pacer:{fleet:" + digest("a\r\nDEL x") + "}"},
		{name: "a percent sign", key: "%abc", want: "retry:pacer:{fleet:" + digest("%abc") + "}"},
		{name: "huge", key: long, want: "retry:pacer:{fleet:" + digest(long) + "}"},
		{name: "not ASCII", key: "ключ", want: "retry:pacer:{fleet:" + digest("ключ") + "}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := store.Key(tt.key); got != tt.want {
				t.Errorf("Key(%.40q) = %.80q, want %.80q", tt.key, got, tt.want)
			}
		})
	}
	other := &PacerStore{Name: "fleet", Prefix: "app:"}
	if got := other.Key("k"); got != "app:{fleet:k}" {
		t.Errorf("Key with a prefix = %q, want %q", got, "app:{fleet:k}")
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "%" + hex.EncodeToString(sum[:])
}

// TestPacerStoreHostileKeys: keys a Redis key cannot hold as they are are
// paced like any other, each apart.
func TestPacerStoreHostileKeys(t *testing.T) {
	t.Parallel()
	_, stores := newPacerMini(t)
	ctx := context.Background()
	keys := []string{strings.Repeat("k", 1<<20), "a}b", "a\nb", "{x}", "%", ""}
	for _, k := range keys {
		if err := stores[0].Learn(ctx, k, *requests(bucketOf(10, 0, 1, noMark))); err != nil {
			t.Fatalf("Learn(%.20q): %v", k, err)
		}
	}
	for _, k := range keys {
		// Each key holds its own queue: one in it, so one second.
		if g, err := stores[1].Reserve(ctx, k, 0, forever); err != nil || g.Wait != time.Second {
			t.Errorf("Reserve(%.20q) = %+v, %v; want a wait of 1s", k, g, err)
		}
	}
}

// TestPacerStoreBadState: a flushed script is loaded again; a key of
// another type is an error; garbage in the hash is a bucket that knows
// less, never an error, a panic or a wait out of range.
func TestPacerStoreBadState(t *testing.T) {
	t.Parallel()
	m, stores := newPacerMini(t)
	ctx := context.Background()
	s := stores[0]
	rdb := s.Client.(*redis.Client)
	if err := s.Learn(ctx, "k", *requests(bucketOf(10, 0, 1, noMark))); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Reserve(ctx, "k", 0, forever); err != nil || g.Wait != time.Second {
		t.Errorf("Reserve after SCRIPT FLUSH: %+v, %v; want a wait of 1s", g, err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Learn(ctx, "k", pace.Report{Block: time.Second}); err != nil {
		t.Errorf("Learn after SCRIPT FLUSH: %v", err)
	}

	if err := m.Set(s.Key("str"), "a string"); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Reserve(ctx, "str", 0, forever); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Reserve on a key holding a string: %+v, %v; want a WRONGTYPE error", g, err)
	}
	if err := s.Learn(ctx, "str", pace.Report{Block: time.Second}); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Learn on a key holding a string: %v; want a WRONGTYPE error", err)
	}

	now := strconv.FormatInt(epoch0.UnixMicro(), 10)
	garbage := []struct {
		name   string
		fields []string
		want   time.Duration // the wait of one reservation
	}{
		{name: "all text", fields: []string{"r:limit", "x", "r:level", "y", "blocked", "z"}},
		{name: "infinities", fields: []string{"r:limit", "inf", "r:level", "-inf", "blocked", "inf"}},
		{name: "NaN", fields: []string{"r:limit", "nan", "blocked", "nan", "t:limit", "nan"}},
		{name: "a negative limit", fields: []string{"r:limit", "-10", "r:level", "-50"}},
		{name: "no rate: the longest wait", fields: []string{"r:limit", "10", "r:level", "-1", "r:rate", "-1"},
			want: time.Duration(math.MaxInt64)},
		{name: "a window in the past", fields: []string{"r:limit", "10", "r:level", "0", "r:window", "1000000",
			"r:reset", "5", "r:at", now}, want: 0},
		{name: "a level far in debt", fields: []string{"r:limit", "1", "r:level", "-1e300", "r:rate", "1e-300"},
			want: time.Duration(math.MaxInt64)},
		{name: "at in the future", fields: []string{"r:limit", "10", "r:level", "-10", "r:window", "1000000",
			"r:reset", "0", "r:at", "1e300"}, want: 0},
	}
	for _, g := range garbage {
		t.Run(g.name, func(t *testing.T) {
			key := "garbage " + g.name
			m.HSet(s.Key(key), g.fields...)
			got, err := s.Reserve(ctx, key, 5, forever)
			if err != nil || got.Wait != g.want || got.RetryAfter {
				t.Errorf("Reserve = %+v, %v; want a wait of %v", got, err, g.want)
			}
			if err := s.Learn(ctx, key, pace.Report{Requests: bucketOf(10, 0, 1, noMark),
				Tokens: bucketOf(10, 0, 1, noMark)}); err != nil {
				t.Errorf("Learn: %v", err)
			}
			// The report wrote a sane bucket over the garbage.
			if got, err := s.Reserve(ctx, key, 0, forever); err != nil || got.Wait <= 0 {
				t.Errorf("Reserve after a report of none left = %+v, %v; want a wait", got, err)
			}
		})
	}
}

// TestPacerStoreBadArguments: what no Pacer sends is an error before
// anything is written.
func TestPacerStoreBadArguments(t *testing.T) {
	t.Parallel()
	m, stores := newPacerMini(t)
	ctx := context.Background()
	s := stores[0]
	inf, nan := math.Inf(1), math.NaN()
	for _, tokens := range []float64{nan, inf, -inf, -1} {
		if g, err := s.Reserve(ctx, "k", tokens, forever); err == nil {
			t.Errorf("Reserve of %v tokens = %+v; want an error", tokens, g)
		}
	}
	ok := bucketOf(10, 5, 1, noMark)
	tests := []struct {
		name string
		r    pace.Report
	}{
		{name: "NaN limit", r: pace.Report{Requests: bucketOf(nan, 5, 1, noMark)}},
		{name: "infinite remaining", r: pace.Report{Requests: bucketOf(10, inf, 1, noMark)}},
		{name: "negative remaining", r: pace.Report{Requests: bucketOf(10, -1, 1, noMark)}},
		{name: "negative limit", r: pace.Report{Tokens: bucketOf(-10, 5, 1, noMark), Requests: ok}},
		{name: "negative rate", r: pace.Report{Requests: ok, Tokens: bucketOf(10, 5, -1, noMark)}},
		{name: "NaN mark", r: pace.Report{Requests: bucketOf(10, 5, 1, pace.Mark{Level: nan, Epoch: 1})}},
		{name: "negative corrected", r: pace.Report{Requests: bucketOf(10, 5, 1, pace.Mark{Corrected: -1, Epoch: 1})}},
		{name: "negative epoch", r: pace.Report{Requests: bucketOf(10, 5, 1, pace.Mark{Epoch: -1})}},
		{name: "negative window", r: pace.Report{Requests: windowOf(10, 5, -time.Second, 0, noMark)}},
		{name: "negative reset", r: pace.Report{Requests: windowOf(10, 5, time.Second, -time.Second, noMark)}},
		{name: "negative block", r: pace.Report{Requests: ok, Block: -time.Second}},
	}
	for _, tt := range tests {
		if err := s.Learn(ctx, "k", tt.r); err == nil {
			t.Errorf("%s: Learn = nil; want an error", tt.name)
		}
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("keys %q written by calls that failed", keys)
	}
	if err := s.Learn(ctx, "k", pace.Report{}); err != nil || len(m.Keys()) != 0 {
		t.Errorf("a report of nothing: %v, keys %q; want no error and no key", err, m.Keys())
	}
	neg := &PacerStore{Client: s.Client, TTL: -time.Second}
	if _, err := neg.Reserve(ctx, "k", 0, forever); !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("Reserve with a negative TTL: %v; want ErrInvalidPolicy", err)
	}
	if err := neg.Learn(ctx, "k", pace.Report{Block: time.Second}); !errors.Is(err, retry.ErrInvalidPolicy) {
		t.Errorf("Learn with a negative TTL: %v; want ErrInvalidPolicy", err)
	}
	var nilStore *PacerStore
	if _, err := nilStore.Reserve(ctx, "k", 0, forever); err == nil {
		t.Error("Reserve on a nil *PacerStore: want an error")
	}
	if err := (&PacerStore{}).Learn(ctx, "k", pace.Report{Block: time.Second}); err == nil {
		t.Error("Learn without a Client: want an error")
	}
}

// TestPacerStoreOddReplies: a server that answers anything but what the
// scripts return is an error, never a panic nor a grant out of range.
func TestPacerStoreOddReplies(t *testing.T) {
	t.Parallel()
	good := []any{"0", "0", "1", "0", "1", "0", "0", "0"}
	with := func(i int, v any) []any {
		r := append([]any(nil), good...)
		r[i] = v
		return r
	}
	tests := []struct {
		name   string
		client redis.Scripter
	}{
		{name: "error", client: oddScripter{err: errors.New("READONLY")}},
		{name: "NOSCRIPT forever", client: oddScripter{err: redis.ErrNoScript}},
		{name: "a string", client: oddScripter{val: "OK"}},
		{name: "nil", client: oddScripter{}},
		{name: "too short", client: oddScripter{val: good[:7]}},
		{name: "too long", client: oddScripter{val: append(good, "0")}},
		{name: "not a number", client: oddScripter{val: with(0, "soon")}},
		{name: "a negative wait", client: oddScripter{val: with(0, "-1")}},
		{name: "an infinite wait", client: oddScripter{val: with(0, "inf")}},
		{name: "a NaN level", client: oddScripter{val: with(2, "nan")}},
		{name: "a flag of 2", client: oddScripter{val: with(1, "2")}},
		{name: "a fractional epoch", client: oddScripter{val: with(4, "1.5")}},
		{name: "a huge epoch", client: oddScripter{val: with(7, "1e300")}},
		{name: "a negative correction", client: oddScripter{val: with(6, "-3")}},
		{name: "nested", client: oddScripter{val: with(3, []any{"1"})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &PacerStore{Client: tt.client, Name: "fleet"}
			if g, err := store.Reserve(context.Background(), "k", 1, forever); err == nil {
				t.Errorf("Reserve = %+v, nil; want an error", g)
			}
			if err := store.Learn(context.Background(), "k", pace.Report{Block: time.Second}); err == nil {
				t.Error("Learn = nil; want an error")
			}
		})
	}
	// The well-formed answer reads as it should: the test above is not
	// failing on it.
	store := &PacerStore{Client: oddScripter{val: good}}
	want := pace.Grant{Requests: pace.Mark{Level: 1, Epoch: 1}}
	if g, err := store.Reserve(context.Background(), "k", 1, forever); err != nil || g != want {
		t.Errorf("Reserve of a good answer = %+v, %v; want %+v", g, err, want)
	}
}
