package retryredis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// DefaultPacerPrefix is what the keys of a PacerStore start with when its
// Prefix is empty.
const DefaultPacerPrefix = "retry:pacer:"

// DefaultPacerTTL is how long a key of a PacerStore lives once no process
// uses it, when the store's TTL is zero. Each call renews it, and it is
// never set shorter than a Retry-After block still running, nor than the
// wait just granted (up to two days), so that an idle key goes away only
// once it holds nothing that still binds a caller.
const DefaultPacerTTL = time.Hour

// maxPacerKey is the longest key of the Pacer written as it is into a Redis
// key; longer ones, and ones with bytes outside printable ASCII, are
// replaced by a digest.
const maxPacerKey = 200

// PacerStore is a [pace.Store] on Redis: the Pacers of every process
// whose store has the same Client, Prefix and Name share their buckets, one
// hash key per key of the Pacer (an API host and credential), which expires
// once no process has used it for TTL.
//
// Each Reserve and each Learn is one script call (EVALSHA, or EVAL when the
// server has lost the script), timed by the server's TIME, so that the
// clocks of the processes need not agree: only durations cross. The
// scripts keep the model the retry package documents for a PacerStore:
// token buckets and fixed windows reserved first come, first served, moved
// down (never up) to what the servers report, and the Retry-After that
// holds every caller of the key. Every process that shares the buckets
// must give its Pacer the same Key and Cost.
//
// A PacerStore is safe for concurrent use; its fields must not change
// after first use.
type PacerStore struct {
	// Client runs the scripts: a *redis.Client, *redis.ClusterClient or
	// *redis.Ring. The Pacer bounds each call by its StoreTimeout; set
	// ContextTimeoutEnabled in the client's options so that the call on
	// the socket ends then too. A cluster client is asked to read the slot
	// map again (ReloadState), once a second at most, while calls fail. A
	// nil Client fails every call.
	Client redis.Scripter

	// Name is the fleet's name for this Pacer: processes that share Name
	// (and Redis) share buckets. Empty is a name like any.
	Name string

	// Prefix starts every key, which is Prefix+"{"+Name+":"+key+"}": the
	// braces keep each in one hash slot of a cluster. Empty means
	// DefaultPacerPrefix.
	Prefix string

	// TTL is how long an idle key lives; each call renews it, for longer
	// while a Retry-After or a granted wait runs. Zero means
	// DefaultPacerTTL; negative is an error returned by each call.
	TTL time.Duration

	reload reloader // a cluster client's slot map, read again when calls fail
}

var _ pace.Store = (*PacerStore)(nil)

// NewPacerStore returns a PacerStore for the Pacer called name on client,
// with the default prefix and TTL.
func NewPacerStore(client redis.Scripter, name string) *PacerStore {
	return &PacerStore{Client: client, Name: name}
}

// Key returns the Redis key that holds the buckets of the Pacer's key. A
// key longer than 200 bytes, or with a space, a brace, a "%" or a byte
// outside printable ASCII, is replaced by "%" and the hex SHA-256 of it:
// never a huge Redis key, and never one that collides with a key written
// as it is.
func (s *PacerStore) Key(key string) string {
	prefix := s.Prefix
	if prefix == "" {
		prefix = DefaultPacerPrefix
	}
	return prefix + "{" + s.Name + ":" + safeKey(key) + "}"
}

// safeKey is key, or its digest when key is not fit for a Redis key.
func safeKey(key string) string {
	ok := len(key) <= maxPacerKey
	for i := 0; ok && i < len(key); i++ {
		c := key[i]
		ok = c > ' ' && c < 0x7f && c != '{' && c != '}' && c != '%'
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "%" + hex.EncodeToString(sum[:])
}

// errNoPacerClient is returned by the calls of a PacerStore without a
// Client.
var errNoPacerClient = errors.New("retryredis: PacerStore.Client is nil")

// ttl returns the TTL in milliseconds, or an error for a negative one.
func (s *PacerStore) ttl() (int64, error) {
	if s == nil || s.Client == nil {
		return 0, errNoPacerClient
	}
	switch {
	case s.TTL < 0:
		return 0, fmt.Errorf("%w: PacerStore.TTL is %v; it must not be negative", retry.ErrInvalidPolicy, s.TTL)
	case s.TTL == 0:
		return DefaultPacerTTL.Milliseconds(), nil
	}
	ms := s.TTL.Milliseconds()
	if s.TTL%time.Millisecond != 0 {
		ms++ // never shorter than asked
	}
	return ms, nil
}

// Reserve takes one request, and tokens, from key's buckets and returns
// how long the caller must wait, by the server's clock; a wait of maxWait
// or more takes nothing. It returns an error, never a grant out of range,
// when tokens is not a finite number, 0 or more, when Redis fails, or when
// it answers anything but what the script returns.
func (s *PacerStore) Reserve(ctx context.Context, key string, tokens float64, maxWait time.Duration) (pace.Grant, error) {
	ttl, err := s.ttl()
	if err != nil {
		return pace.Grant{}, err
	}
	if !finite(tokens) || tokens < 0 {
		return pace.Grant{}, fmt.Errorf("retryredis: reserving %v tokens: want a finite number, 0 or more", tokens)
	}
	rk := s.Key(key)
	maxw := micros(max(maxWait, 0))
	res, err := pacerReserveScript.Run(ctx, s.Client, []string{rk}, formatFloat(tokens), ttl, maxw).Slice()
	if err != nil {
		s.reload.failed(s.Client, err)
		return pace.Grant{}, fmt.Errorf("retryredis: reserving from %q: %w", rk, err)
	}
	g, err := parseGrant(res)
	if err != nil {
		return pace.Grant{}, fmt.Errorf("retryredis: reserving from %q: %w", rk, err)
	}
	return g, nil
}

// Learn moves key's buckets to what a server reported. It returns an error
// for a report with a number that is not finite, or negative where it
// cannot be, before it writes anything; and when Redis fails.
func (s *PacerStore) Learn(ctx context.Context, key string, r pace.Report) error {
	ttl, err := s.ttl()
	if err != nil {
		return err
	}
	dims := [...]struct {
		name string
		l    *pace.Limit
	}{{"requests", &r.Requests}, {"tokens", &r.Tokens}}
	for _, d := range dims {
		if err := checkLimit(d.l); err != nil {
			return fmt.Errorf("retryredis: learning %s: %w", d.name, err)
		}
	}
	if r.Block < 0 {
		return fmt.Errorf("retryredis: learning a block of %v: it must not be negative", r.Block)
	}
	if r.Requests.Limit == 0 && r.Tokens.Limit == 0 && r.Block == 0 {
		return nil // a report of nothing changes nothing
	}
	args := make([]any, 0, 18)
	for _, d := range dims {
		l := d.l
		args = append(args, formatFloat(l.Limit), formatFloat(l.Remaining), formatFloat(l.Rate),
			micros(l.Window), micros(l.Reset), formatFloat(l.Mark.Level), formatFloat(l.Mark.Corrected), l.Mark.Epoch)
	}
	args = append(args, micros(r.Block), ttl)
	rk := s.Key(key)
	n, err := pacerLearnScript.Run(ctx, s.Client, []string{rk}, args...).Int64()
	if err != nil {
		s.reload.failed(s.Client, err)
		return fmt.Errorf("retryredis: learning into %q: %w", rk, err)
	}
	if n != 1 {
		return fmt.Errorf("retryredis: learning into %q: unexpected answer %d", rk, n)
	}
	return nil
}

// checkLimit rejects a dimension of a report that no Pacer sends.
func checkLimit(l *pace.Limit) error {
	for _, f := range [...]struct {
		name string
		v    float64
		neg  bool // may be negative
	}{
		{"limit", l.Limit, false}, {"remaining", l.Remaining, false}, {"rate", l.Rate, false},
		{"mark level", l.Mark.Level, true}, {"mark corrected", l.Mark.Corrected, false},
	} {
		if !finite(f.v) || (f.v < 0 && !f.neg) {
			return fmt.Errorf("%s is %v; want a finite number, 0 or more", f.name, f.v)
		}
	}
	if l.Window < 0 || l.Reset < 0 || l.Mark.Epoch < 0 {
		return fmt.Errorf("window %v, reset %v, epoch %d: none may be negative", l.Window, l.Reset, l.Mark.Epoch)
	}
	return nil
}

// parseGrant reads the reserve script's answer.
func parseGrant(res []any) (pace.Grant, error) {
	if len(res) != 8 {
		return pace.Grant{}, fmt.Errorf("unexpected answer %v", res)
	}
	var f [8]float64
	for i, x := range res {
		var v float64
		switch x := x.(type) {
		case int64:
			v = float64(x)
		case string:
			var err error
			if v, err = strconv.ParseFloat(x, 64); err != nil {
				return pace.Grant{}, fmt.Errorf("unexpected answer %v", res)
			}
		default:
			return pace.Grant{}, fmt.Errorf("unexpected answer %v", res)
		}
		if !finite(v) || (v < 0 && i != 2 && i != 5) || (i == 1 && v != 0 && v != 1) ||
			((i == 4 || i == 7) && (v != math.Trunc(v) || v > 1<<53)) {
			return pace.Grant{}, fmt.Errorf("unexpected answer %v", res)
		}
		f[i] = v
	}
	return pace.Grant{
		Wait:       durationOfMicros(f[0]),
		RetryAfter: f[1] == 1,
		Requests:   pace.Mark{Level: f[2], Corrected: f[3], Epoch: int64(f[4])},
		Tokens:     pace.Mark{Level: f[5], Corrected: f[6], Epoch: int64(f[7])},
	}, nil
}

// durationOfMicros converts a wait in microseconds, truncating to the
// nanosecond and saturating at the longest Duration.
func durationOfMicros(us float64) time.Duration {
	ns := us * 1e3
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}

// maxScriptMicros is the longest time in microseconds sent to a script:
// about 285 years, within a double's exact integers and written without an
// exponent.
const maxScriptMicros = 1 << 53

// micros is d in whole microseconds, rounded up (a Retry-After or a
// window's end is never brought forward), at most maxScriptMicros.
func micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return min(int64(us), maxScriptMicros)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// formatFloat writes v exactly, without an exponent, which some Lua
// interpreters' tonumber do not read.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
