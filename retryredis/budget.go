package retryredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
)

// DefaultBudgetPrefix is what the keys of a BudgetStore start with when its
// Prefix is empty.
const DefaultBudgetPrefix = "retry:budget:"

// minSliceWidth is the shortest slice of the window the script keeps: slice
// numbers of the server's clock in microseconds divided by at least this
// stay below 2^53 and print exactly from Lua.
const minSliceWidth = time.Millisecond

// budgetScript settles one process with the budget in KEYS[1], a hash that
// holds the window as ten slices: t<i> is the slice number kept in slot i,
// d<i> its first attempts and r<i> its retries granted; L is the latest
// slice seen, and D and R the sums of the slots of the window that ends
// with L, kept so that a settlement reads a handful of fields. It keeps the
// rule of retry.Budget: retries granted in the window (leases count as
// granted until handed back) stay within ratio*deposits + floor.
//
// Fields that are not finite numbers, 0 or more, count as absent, so that
// garbage in the hash cannot make the script grant more than its counts
// allow.
//
// ARGV: deposits, unspent, epoch, want, ratio, floor (retries per window),
// slice width in microseconds, TTL in milliseconds. It returns
// {granted, slice}; the slice tags the lease, so that what is not spent of
// it goes back to the slice that counted it, or nowhere once that slice
// has left the window.
var budgetScript = redis.NewScript(`
local tonumber, huge, max, min = tonumber, math.huge, math.max, math.min
local deposits, unspent, epoch, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ratio, floor, width, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
if not (deposits and unspent and epoch and want and ratio and floor and width and ttl) or width < 1 then
  return redis.error_reply('ERR retryredis: bad arguments')
end
local key = KEYS[1]
local function num(x)
  x = tonumber(x)
  if x and x == x and x >= 0 and x < huge then return x end
  return nil
end
-- The fields of each slot, by slot + 1: names written out rather than
-- built from numbers, which Lua formats with sprintf.
local T = {'t0', 't1', 't2', 't3', 't4', 't5', 't6', 't7', 't8', 't9'}
local Dn = {'d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7', 'd8', 'd9'}
local Rn = {'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9'}
-- set holds the HSET's arguments, n of them.
local set, n = {}, 0
local function put(f, x)
  set[n + 1], set[n + 2] = f, x
  n = n + 2
end
local t = redis.call('TIME')
local s = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / width)
local c, e = s % 10, epoch % 10
local v = redis.call('HMGET', key, 'L', 'D', 'R', T[c + 1], Dn[c + 1], Rn[c + 1], T[e + 1], Rn[e + 1])
local last, d, r = num(v[1]), num(v[2]) or 0, num(v[3]) or 0
local tags, ds, rs = {}, {}, {}
tags[c], ds[c], rs[c] = num(v[4]), num(v[5]), num(v[6])
tags[e], rs[e] = num(v[7]), num(v[8])
local fresh = false
if not last or s - last >= 10 then
  -- A new budget, or one idle for a whole window: nothing in it counts.
  d, r, fresh = 0, 0, true
  tags, ds, rs = {}, {}, {}
  tags[c], ds[c], rs[c] = s, 0, 0
  put(T[c + 1], s)
  last = s
elseif s > last then
  -- The slots of slices last+1 to s leave the window that ends with last:
  -- take them out of the sums and start them afresh.
  fresh = true
  local f, m = {}, 0
  for x = last + 1, s do
    local j = x % 10 + 1
    f[m + 1], f[m + 2], f[m + 3] = T[j], Dn[j], Rn[j]
    m = m + 3
  end
  local old = redis.call('HMGET', key, unpack(f))
  for i = 0, s - last - 1 do
    local j = (last + 1 + i) % 10
    local tag = num(old[3 * i + 1])
    if tag and last - tag >= 0 and last - tag < 10 then
      d = d - (num(old[3 * i + 2]) or 0)
      r = r - (num(old[3 * i + 3]) or 0)
    end
    tags[j], ds[j], rs[j] = last + 1 + i, 0, 0
    put(T[j + 1], last + 1 + i) put(Dn[j + 1], 0) put(Rn[j + 1], 0)
  end
  d, r, last = max(0, d), max(0, r), s
elseif s < last then
  -- A server clock that went back (a failover, say): count in the latest
  -- slice seen, so that the sums stay those of one window.
  s, c = last, last % 10
  local w = redis.call('HMGET', key, T[c + 1], Dn[c + 1], Rn[c + 1])
  tags[c], ds[c], rs[c] = num(w[1]), num(w[2]), num(w[3])
end
if tags[c] ~= s then
  -- Only a hash that lost its slot for the present: start it.
  tags[c], ds[c], rs[c] = s, 0, 0
  put(T[c + 1], s)
end
if unspent > 0 and s - epoch >= 0 and s - epoch < 10 and tags[e] == epoch then
  local back = min(unspent, rs[e] or 0)
  rs[e], r = (rs[e] or 0) - back, max(0, r - back)
  if e ~= c then put(Rn[e + 1], rs[e]) end
end
ds[c] = (ds[c] or 0) + max(0, deposits)
d = d + max(0, deposits)
local grant = max(0, min(want, math.floor(ratio * d + floor + 1e-9 - r)))
rs[c] = (rs[c] or 0) + grant
r = r + grant
put('L', s) put('D', d) put('R', r) put(Dn[c + 1], ds[c]) put(Rn[c + 1], rs[c])
redis.call('HSET', key, unpack(set, 1, n))
-- Once per slice is enough to keep the key two windows past its last use.
if fresh then
  redis.call('PEXPIRE', key, ttl)
end
return {grant, s}
`)

// BudgetStore is a [retry.BudgetStore] on Redis: the Budgets of every
// process whose store has the same Client, Prefix and Name share one
// budget, kept in one hash key that expires when no process has used it
// for about two Windows (its TTL is set once per tenth of the Window).
//
// Each settlement is one script call (EVALSHA, or EVAL when the server has
// lost the script), timed by the server's TIME, so that the clocks of the
// processes need not agree. Every process that shares a budget must give
// its Budget the same Ratio, MinPerSecond and Window. A Window under 10 ms
// is kept in slices of 1 ms.
//
// A BudgetStore is safe for concurrent use; its fields must not change
// after first use.
type BudgetStore struct {
	// Client runs the script: a *redis.Client, *redis.ClusterClient or
	// *redis.Ring. The Budget bounds each call by StoreTimeout; set
	// ContextTimeoutEnabled in the client's options so that the call on
	// the socket ends then too, rather than at the client's ReadTimeout.
	// A cluster client is asked to read the slot map again (ReloadState),
	// once a second at most, while calls fail, so that a failover is
	// followed within seconds. A nil Client fails every settlement.
	Client redis.Scripter

	// Name tells the budgets on one Redis apart: one per service or API
	// key whose retries are capped together. Empty is a name like any.
	Name string

	// Prefix starts the budget's key, which is Prefix+"{"+Name+"}": the
	// braces keep it in one hash slot of a cluster. Empty means
	// DefaultBudgetPrefix.
	Prefix string

	reload reloader // a cluster client's slot map, read again when calls fail
}

// NewBudgetStore returns a BudgetStore for the budget called name on
// client, with the default prefix.
func NewBudgetStore(client redis.Scripter, name string) *BudgetStore {
	return &BudgetStore{Client: client, Name: name}
}

// Key returns the Redis key that holds the budget.
func (s *BudgetStore) Key() string {
	prefix := s.Prefix
	if prefix == "" {
		prefix = DefaultBudgetPrefix
	}
	return prefix + "{" + s.Name + "}"
}

// errNoClient is returned by Settle on a BudgetStore without a Client.
var errNoClient = errors.New("retryredis: BudgetStore.Client is nil")

// Settle reports a process's first attempts and unspent retries to Redis
// and returns its new lease, by the rule of [retry.Budget]. It returns an
// error, never a lease out of range, when Redis fails or answers anything
// but what the script returns.
func (s *BudgetStore) Settle(ctx context.Context, r retry.BudgetSettlement) (retry.BudgetLease, error) {
	if s == nil || s.Client == nil {
		return retry.BudgetLease{}, errNoClient
	}
	window := r.Window
	if window <= 0 {
		window = retry.DefaultBudgetWindow
	}
	width := max(window/10, minSliceWidth)
	ttl := max(2*window, time.Second)
	res, err := budgetScript.Run(ctx, s.Client, []string{s.Key()},
		r.Deposits, r.Unspent, r.Epoch, r.Want,
		formatFloat(r.Ratio), formatFloat(r.MinPerSecond*window.Seconds()),
		width.Microseconds(), ttl.Milliseconds()).Int64Slice()
	if err != nil {
		s.reload.failed(s.Client, err)
		return retry.BudgetLease{}, fmt.Errorf("retryredis: settling budget %q: %w", s.Key(), err)
	}
	if len(res) != 2 || res[0] < 0 || res[0] > r.Want {
		return retry.BudgetLease{}, fmt.Errorf("retryredis: settling budget %q: unexpected answer %v", s.Key(), res)
	}
	return retry.BudgetLease{Retries: res[0], Epoch: res[1]}, nil
}
