package retryredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// d<i> its first attempts and r<i> its retries granted. It keeps the rule of
// retry.Budget: retries granted in the window (leases count as granted
// until handed back) stay within ratio*deposits + floor.
//
// Fields that are not finite numbers, 0 or more, count as absent, so that
// a hash written by something else cannot make the script grant more.
//
// ARGV: deposits, unspent, epoch, want, ratio, floor (retries per window),
// slice width in microseconds, TTL in milliseconds. It returns
// {granted, slice}; the slice tags the lease, so that what is not spent of
// it goes back to the slice that counted it, or nowhere once that slice
// has left the window.
var budgetScript = redis.NewScript(`
local deposits, unspent, epoch, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ratio, floor, width, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
if not (deposits and unspent and epoch and want and ratio and floor and width and ttl) or width < 1 then
  return redis.error_reply('ERR retryredis: bad arguments')
end
local key = KEYS[1]
local t = redis.call('TIME')
local s = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / width)
local v = redis.call('HMGET', key, 't0', 't1', 't2', 't3', 't4', 't5', 't6', 't7', 't8', 't9',
  'd0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7', 'd8', 'd9',
  'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9')
for i = 1, 30 do
  local x = tonumber(v[i])
  if x and x == x and x >= 0 and x < math.huge then v[i] = x else v[i] = nil end
end
-- Slot i (0 to 9) is v[i+1] (its slice), v[i+11] (first attempts), v[i+21] (retries).
local c = s % 10 + 1
local fresh = v[c] ~= s
if fresh then
  v[c], v[c + 10], v[c + 20] = s, 0, 0
end
local e = epoch % 10 + 1
local back = unspent > 0 and s - epoch >= 0 and s - epoch < 10 and v[e] == epoch
if back then
  v[e + 20] = math.max(0, (v[e + 20] or 0) - unspent)
end
v[c + 10] = (v[c + 10] or 0) + math.max(0, deposits)
local d, r = 0, 0
for i = 1, 10 do
  local tag = v[i]
  if tag and s - tag >= 0 and s - tag < 10 then
    d = d + (v[i + 10] or 0)
    r = r + (v[i + 20] or 0)
  end
end
local grant = math.max(0, math.min(want, math.floor(ratio * d + floor + 1e-9 - r)))
v[c + 20] = (v[c + 20] or 0) + grant
local n = c - 1
if back and e ~= c then
  redis.call('HSET', key, 't' .. n, s, 'd' .. n, v[c + 10], 'r' .. n, v[c + 20], 'r' .. (e - 1), v[e + 20])
else
  redis.call('HSET', key, 't' .. n, s, 'd' .. n, v[c + 10], 'r' .. n, v[c + 20])
end
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
	// A nil Client fails every settlement.
	Client redis.Scripter

	// Name tells the budgets on one Redis apart: one per service or API
	// key whose retries are capped together. Empty is a name like any.
	Name string

	// Prefix starts the budget's key, which is Prefix+"{"+Name+"}": the
	// braces keep it in one hash slot of a cluster. Empty means
	// DefaultBudgetPrefix.
	Prefix string
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
		strconv.FormatFloat(r.Ratio, 'g', -1, 64),
		strconv.FormatFloat(r.MinPerSecond*window.Seconds(), 'g', -1, 64),
		width.Microseconds(), ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return retry.BudgetLease{}, fmt.Errorf("retryredis: settling budget %q: %w", s.Key(), err)
	}
	if len(res) != 2 || res[0] < 0 || res[0] > r.Want {
		return retry.BudgetLease{}, fmt.Errorf("retryredis: settling budget %q: unexpected answer %v", s.Key(), res)
	}
	return retry.BudgetLease{Retries: res[0], Epoch: res[1]}, nil
}
