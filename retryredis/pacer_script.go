package retryredis

import "github.com/redis/go-redis/v9"

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
-- microseconds still binds a caller, up to two days, twice the furthest
-- reset or Retry-After the Pacer believes: garbage in the hash cannot keep
-- a key for years.
local function keep(ttl, us)
  redis.call('PEXPIRE', key, math.ceil(math.max(ttl, math.min(us, 1728e8) / 1000)))
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
if a[18] < 1 then return redis.error_reply('ERR retryredis: bad arguments') end
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
