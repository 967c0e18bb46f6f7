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
)

// DefaultPacerPrefix is what the keys of a PacerStore start with when its
// Prefix is empty.
const DefaultPacerPrefix = "retry:pacer:"

// DefaultPacerTTL is how long a key of a PacerStore lives once no process
// uses it, when the store's TTL is zero. Each call renews it, and it is
// never set shorter than a Retry-After block still running, nor than the
// wait just granted, so that an idle key goes away only once it holds
// nothing that still binds a caller.
const DefaultPacerTTL = time.Hour

// maxPacerKey is the longest key of the Pacer written as it is into a Redis
// key; longer ones, and ones with bytes outside printable ASCII, are
// replaced by a digest.
const maxPacerKey = 200

// pacerLib is the part the two scripts share: the bucket of the in-process
// Pacer's store model, on the Redis server's clock in microseconds.
//
// A bucket is eight fields of the hash, named after its dimension ("r" for
// requests, "t" for tokens): limit, level, rate (per second), window and
// reset (its end, for a fixed window, in microseconds), at (the last
// advance), corrected and epoch. The hash's "blocked" field is the end of a
// Retry-After. A field that is not a finite number counts as absent, and so
// does a negative one where only the level may be negative: garbage in the
// hash reads as a bucket that knows less, never as a crash.
const pacerLib = `
local key = KEYS[1]
local names = {'limit', 'level', 'rate', 'window', 'reset', 'at', 'corrected', 'epoch'}
-- The fields' names, written out: no string is built per call.
local hfields = {
  r = {'r:limit', 'r:level', 'r:rate', 'r:window', 'r:reset', 'r:at', 'r:corrected', 'r:epoch'},
  t = {'t:limit', 't:level', 't:rate', 't:window', 't:reset', 't:at', 't:corrected', 't:epoch'},
}
local moved = {2, 5, 6, 8} -- what a reservation changes: level, reset, at, epoch
local function num(x)
  x = tonumber(x)
  if x and x == x and x > -math.huge and x < math.huge then return x end
  return nil
end
local function pos(x)
  x = num(x)
  if x and x >= 0 then return x end
  return 0
end
-- out is x to write or return exactly: an integer as a number, which every
-- Redis writes as its digits (a reply makes it an integer), anything else
-- as %.17g, which reads back exactly but costs a microsecond, and which
-- Redis's own conversion of a Lua number would not give every version.
local function out(x)
  if x == math.floor(x) and x > -9e15 and x < 9e15 then return x end
  return string.format('%.17g', x)
end
local function fields(list, d)
  for _, f in ipairs(hfields[d]) do table.insert(list, f) end
end
local function load(v, i)
  return {limit = pos(v[i + 1]), level = num(v[i + 2]) or 0, rate = pos(v[i + 3]), window = pos(v[i + 4]),
    reset = pos(v[i + 5]), at = pos(v[i + 6]), corrected = pos(v[i + 7]), epoch = pos(v[i + 8])}
end
local function save(set, b, d, all)
  local f = hfields[d]
  if all then
    for i, n in ipairs(names) do table.insert(set, f[i]) table.insert(set, out(b[n])) end
  else
    for _, i in ipairs(moved) do table.insert(set, f[i]) table.insert(set, out(b[names[i]])) end
  end
end
local function advance(b, now)
  if b.limit == 0 or now <= b.at then return end
  if b.window == 0 then
    b.level = math.min(b.limit, b.level + b.rate * (now - b.at) / 1e6)
  elseif now >= b.reset then
    local n = math.floor((now - b.reset) / b.window) + 1
    b.level = math.min(math.min(b.level, 0) + n * b.limit, b.limit)
    b.reset = b.reset + n * b.window
    b.epoch = b.epoch + n
  end
  b.at = now
end
-- keep sets the key's TTL: ttl milliseconds, or longer while a wait of us
-- microseconds still binds a caller, up to a day, the furthest the Pacer
-- believes a server: garbage in the hash cannot keep a key for years.
local function keep(ttl, us)
  redis.call('PEXPIRE', key, math.ceil(math.max(ttl, math.min(us, 864e8) / 1000)))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
`

// pacerReserveScript takes one request, and ARGV[1] tokens, from the
// buckets in KEYS[1], and keeps the key ARGV[2] milliseconds at least. It
// returns the wait in microseconds, 1 when the wait is a Retry-After's,
// and the two marks (level, corrected, epoch): integers as they are, other
// numbers as strings, since Redis turns a Lua number in a reply into an
// integer.
var pacerReserveScript = redis.NewScript(pacerLib + `
local tokens, ttl = num(ARGV[1]), num(ARGV[2])
if not (tokens and ttl) or tokens < 0 or ttl < 1 then
  return redis.error_reply('ERR retryredis: bad arguments')
end
local list = {}
fields(list, 'r')
table.insert(list, 'blocked')
if tokens > 0 then fields(list, 't') end
local v = redis.call('HMGET', key, unpack(list))
local set = {}
local function take(b, d, n)
  if b.limit == 0 then return 0, 0, 0, 0 end
  advance(b, now)
  b.level = b.level - math.min(n, b.limit)
  save(set, b, d, false)
  if b.level >= 0 then return 0, b.level, b.corrected, b.epoch end
  if b.window == 0 then return -b.level / b.rate * 1e6, 0, b.corrected, b.epoch end
  local k = math.ceil(-b.level / b.limit)
  return b.reset - now + (k - 1) * b.window, b.level + k * b.limit, b.corrected, b.epoch + k
end
local wait, rl, rc, re = take(load(v, 0), 'r', 1)
local tl, tc, te = 0, 0, 0
if tokens > 0 then
  local tw
  tw, tl, tc, te = take(load(v, 9), 't', tokens)
  wait = math.max(wait, tw)
end
-- A rate of 0 gives an infinite wait: the Go side reads the cap as the
-- longest duration.
if wait ~= wait or wait > 1e16 then wait = 1e16 end
wait = math.max(wait, 0)
local hinted = 0
local blocked = pos(v[9]) - now
if blocked > wait then wait, hinted = blocked, 1 end
if #set > 0 then redis.call('HSET', key, unpack(set)) end
keep(ttl, wait)
return {out(wait), hinted, out(rl), out(rc), out(re), out(tl), out(tc), out(te)}
`)

// pacerLearnScript moves the buckets in KEYS[1] to a report: ARGV[1..8] for
// requests and ARGV[9..16] for tokens, each limit, remaining, rate, window
// and reset (in microseconds), and the mark's level, corrected and epoch;
// ARGV[17] the Retry-After block in microseconds, ARGV[18] the TTL in
// milliseconds. The Go side has checked the arguments; the script checks
// that they are numbers.
var pacerLearnScript = redis.NewScript(pacerLib + `
local a = {}
for i = 1, 18 do
  a[i] = num(ARGV[i])
  if not a[i] then return redis.error_reply('ERR retryredis: bad arguments') end
end
local list, dims = {}, {}
for i, d in ipairs({'r', 't'}) do
  if a[8 * i - 7] > 0 then fields(list, d) table.insert(dims, {d, 8 * i - 8, 8 * #dims}) end
end
local block = a[17]
table.insert(list, 'blocked')
local v = redis.call('HMGET', key, unpack(list))
local set = {}
for _, dim in ipairs(dims) do
  local d, i, b = dim[1], dim[2], load(v, dim[3])
  local limit, remaining, rate, window, reset = a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5]
  local ml, mc, me = a[i + 6], a[i + 7], a[i + 8]
  advance(b, now)
  if b.limit ~= limit or (b.window == 0) ~= (window == 0) then
    -- A new limit: the levels before no longer compare, but the queue's
    -- debt stays owed.
    b.level = remaining + math.min(b.level, 0)
    b.limit, b.rate, b.window, b.reset, b.at, b.corrected, b.epoch = limit, rate, window, now + reset, now, 0, b.epoch + 1
  elseif window == 0 or me == 0 or me == b.epoch then
    if window ~= 0 then b.window, b.reset = window, now + reset else b.rate = rate end
    local c = b.level - remaining
    if me == b.epoch then c = ml - remaining - (b.corrected - mc) end
    if c > 0 then b.level, b.corrected = b.level - c, b.corrected + c end
  end
  save(set, b, d, true)
end
local blocked = pos(v[#list])
if block > 0 and now + block > blocked then
  blocked = now + block
  table.insert(set, 'blocked') table.insert(set, out(blocked))
end
if #set > 0 then redis.call('HSET', key, unpack(set)) end
-- Never shorter than a block still running, whoever set it.
keep(a[18], blocked - now)
return 1
`)

// PacerStore is a [retry.PacerStore] on Redis: the Pacers of every process
// whose store has the same Client, Prefix and Name share their buckets, one
// hash key per key of the Pacer (an API host and credential), which expires
// once no process has used it for TTL.
//
// Each Reserve and each Learn is one script call (EVALSHA, or EVAL when the
// server has lost the script), timed by the server's TIME, so that the
// clocks of the processes need not agree: only durations cross. The script
// keeps the model the retry package documents for a PacerStore: token
// buckets and fixed windows reserved first come, first served, moved down
// (never up) to what the servers report, and the Retry-After that holds
// every caller of the key.
//
// A PacerStore is safe for concurrent use; its fields must not change
// after first use.
type PacerStore struct {
	// Client runs the scripts: a *redis.Client, *redis.ClusterClient or
	// *redis.Ring. The Pacer bounds each call by its StoreTimeout; set
	// ContextTimeoutEnabled in the client's options so that the call on
	// the socket ends then too. A nil Client fails every call.
	Client redis.Scripter

	// Name is the fleet's name for this Pacer: processes that share Name
	// (and Redis) share buckets. Empty is a name like any.
	Name string

	// Prefix starts every key, which is Prefix+"{"+Name+":"+key+"}": the
	// braces keep each in one hash slot of a cluster. Empty means
	// DefaultPacerPrefix.
	Prefix string

	// TTL is how long an idle key lives; each call renews it. Zero means
	// DefaultPacerTTL; negative is an error returned by each call.
	TTL time.Duration
}

var _ retry.PacerStore = (*PacerStore)(nil)

// NewPacerStore returns a PacerStore for the Pacer called name on client,
// with the default prefix and TTL.
func NewPacerStore(client redis.Scripter, name string) *PacerStore {
	return &PacerStore{Client: client, Name: name}
}

// Key returns the Redis key that holds the buckets of the Pacer's key. A
// key longer than 200 bytes, or with a byte outside printable ASCII or a
// brace, is replaced by "%" and the hex SHA-256 of it: never a huge Redis
// key, and never one that collides with a key written as it is, which
// cannot hold "%".
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
// how long the caller must wait, by the server's clock. It returns an
// error, never a grant out of range, when tokens is not a finite number,
// 0 or more, when Redis fails, or when it answers anything but what the
// script returns.
func (s *PacerStore) Reserve(ctx context.Context, key string, tokens float64) (retry.PaceGrant, error) {
	ttl, err := s.ttl()
	if err != nil {
		return retry.PaceGrant{}, err
	}
	if !finite(tokens) || tokens < 0 {
		return retry.PaceGrant{}, fmt.Errorf("retryredis: reserving %v tokens: want a finite number, 0 or more", tokens)
	}
	rk := s.Key(key)
	res, err := pacerReserveScript.Run(ctx, s.Client, []string{rk}, formatFloat(tokens), ttl).Slice()
	if err != nil {
		return retry.PaceGrant{}, fmt.Errorf("retryredis: reserving from %q: %w", rk, err)
	}
	g, err := parseGrant(res)
	if err != nil {
		return retry.PaceGrant{}, fmt.Errorf("retryredis: reserving from %q: %w", rk, err)
	}
	return g, nil
}

// Learn moves key's buckets to what a server reported. It returns an error
// for a report with a number that is not finite, or negative where it
// cannot be, before it writes anything; and when Redis fails.
func (s *PacerStore) Learn(ctx context.Context, key string, r retry.PaceReport) error {
	ttl, err := s.ttl()
	if err != nil {
		return err
	}
	args := make([]any, 0, 18)
	for _, l := range [...]struct {
		name string
		l    *retry.PaceLimit
	}{{"requests", &r.Requests}, {"tokens", &r.Tokens}} {
		if err := checkLimit(l.l); err != nil {
			return fmt.Errorf("retryredis: learning %s: %w", l.name, err)
		}
		args = append(args, formatFloat(l.l.Limit), formatFloat(l.l.Remaining), formatFloat(l.l.Rate),
			micros(l.l.Window), micros(l.l.Reset),
			formatFloat(l.l.Mark.Level), formatFloat(l.l.Mark.Corrected), l.l.Mark.Epoch)
	}
	if r.Block < 0 {
		return fmt.Errorf("retryredis: learning a block of %v: it must not be negative", r.Block)
	}
	if r.Requests.Limit == 0 && r.Tokens.Limit == 0 && r.Block == 0 {
		return nil // a report of nothing changes nothing
	}
	args = append(args, micros(r.Block), ttl)
	rk := s.Key(key)
	n, err := pacerLearnScript.Run(ctx, s.Client, []string{rk}, args...).Int64()
	if err != nil {
		return fmt.Errorf("retryredis: learning into %q: %w", rk, err)
	}
	if n != 1 {
		return fmt.Errorf("retryredis: learning into %q: unexpected answer %d", rk, n)
	}
	return nil
}

// checkLimit rejects a dimension of a report that no Pacer sends.
func checkLimit(l *retry.PaceLimit) error {
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
func parseGrant(res []any) (retry.PaceGrant, error) {
	if len(res) != 8 {
		return retry.PaceGrant{}, fmt.Errorf("unexpected answer %v", res)
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
				return retry.PaceGrant{}, fmt.Errorf("unexpected answer %v", res)
			}
		default:
			return retry.PaceGrant{}, fmt.Errorf("unexpected answer %v", res)
		}
		if !finite(v) || (v < 0 && i != 2 && i != 5) || (i == 1 && v != 0 && v != 1) ||
			((i == 4 || i == 7) && (v != math.Trunc(v) || v > 1<<53)) {
			return retry.PaceGrant{}, fmt.Errorf("unexpected answer %v", res)
		}
		f[i] = v
	}
	return retry.PaceGrant{
		Wait:       durationOfMicros(f[0]),
		RetryAfter: f[1] == 1,
		Requests:   retry.PaceMark{Level: f[2], Corrected: f[3], Epoch: int64(f[4])},
		Tokens:     retry.PaceMark{Level: f[5], Corrected: f[6], Epoch: int64(f[7])},
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

// micros is d in whole microseconds, rounded up: a Retry-After or a
// window's end is never brought forward.
func micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// formatFloat writes v exactly, without an exponent, which some Lua
// interpreters' tonumber do not read.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
