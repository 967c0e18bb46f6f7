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
local huge, floor, min, max = math.huge, math.floor, math.min, math.max
-- The fields of each dimension, in the order load reads them.
local R = {'r:limit', 'r:level', 'r:rate', 'r:window', 'r:reset', 'r:at', 'r:corrected', 'r:epoch'}
local T = {'t:limit', 't:level', 't:rate', 't:window', 't:reset', 't:at', 't:corrected', 't:epoch'}
local function num(x)
  x = tonumber(x)
  if x and x == x and x > -huge and x < huge then return x end
  return nil
end
local function pos(x)
  x = tonumber(x)
  if x and x >= 0 and x < huge then return x end
  return 0
end
-- out is x to write or return exactly: an integer as a number, which every
-- Redis writes as its digits (a reply makes it an integer), anything else
-- as %.17g, which reads back exactly but costs a microsecond, and which
-- Redis's own conversion of a Lua number would not give every version.
local function out(x)
  if x == floor(x) and x > -9e15 and x < 9e15 then return x end
  return string.format('%.17g', x)
end
-- load reads the bucket whose eight fields start at v[i + 1].
local function load(v, i)
  return {limit = pos(v[i + 1]), level = num(v[i + 2]) or 0, rate = pos(v[i + 3]), window = pos(v[i + 4]),
    reset = pos(v[i + 5]), at = pos(v[i + 6]), corrected = pos(v[i + 7]), epoch = pos(v[i + 8])}
end
-- set holds the HSET's arguments, n of them.
local set, n = {}, 0
local function put(f, x)
  set[n + 1], set[n + 2] = f, out(x)
  n = n + 2
end
local function advance(b, now)
  if b.limit == 0 or now <= b.at then return end
  if b.window == 0 then
    b.level = min(b.limit, b.level + b.rate * (now - b.at) / 1e6)
  elseif now >= b.reset then
    local k = floor((now - b.reset) / b.window) + 1
    b.level = min(min(b.level, 0) + k * b.limit, b.limit)
    b.reset = b.reset + k * b.window
    b.epoch = b.epoch + k
  end
  b.at = now
end
-- keep writes set and sets the key's TTL: ttl milliseconds, or longer
-- while a wait of us microseconds still binds a caller, up to two days,
-- twice the furthest reset or Retry-After the Pacer believes: garbage in
-- the hash cannot keep a key for years.
local function keep(ttl, us)
  if n > 0 then redis.call('HSET', key, unpack(set)) end
  redis.call('PEXPIRE', key, math.ceil(max(ttl, min(us, 1728e8) / 1000)))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
`

// pacerReserveScript takes one request, and ARGV[1] tokens, from the
// buckets in KEYS[1], unless the wait would be ARGV[3] microseconds or
// more, and keeps the key ARGV[2] milliseconds at least. It returns the
// wait in microseconds, 1 when the wait is a Retry-After's, and the two
// marks (level, corrected, epoch; zeros when nothing was taken): integers
// as they are, other numbers as strings, since Redis turns a Lua number in
// a reply into an integer.
var pacerReserveScript = redis.NewScript(pacerLib + `
local tokens, ttl, maxw = num(ARGV[1]), num(ARGV[2]), num(ARGV[3])
if not (tokens and ttl and maxw) or tokens < 0 or ttl < 1 or maxw < 0 then
  return redis.error_reply('ERR retryredis: bad arguments')
end
local v
if tokens > 0 then
  v = redis.call('HMGET', key, 'blocked', R[1], R[2], R[3], R[4], R[5], R[6], R[7], R[8],
    T[1], T[2], T[3], T[4], T[5], T[6], T[7], T[8])
else
  v = redis.call('HMGET', key, 'blocked', R[1], R[2], R[3], R[4], R[5], R[6], R[7], R[8])
end
-- take reserves amount from b, whose fields are f, and returns the wait in
-- microseconds and the mark.
local function take(b, f, amount)
  if b.limit == 0 then return 0, 0, 0, 0 end
  advance(b, now)
  b.level = b.level - min(amount, b.limit)
  put(f[2], b.level) put(f[5], b.reset) put(f[6], b.at) put(f[8], b.epoch)
  if b.level >= 0 then return 0, b.level, b.corrected, b.epoch end
  if b.window == 0 then return -b.level / b.rate * 1e6, 0, b.corrected, b.epoch end
  local k = math.ceil(-b.level / b.limit)
  return b.reset - now + (k - 1) * b.window, b.level + k * b.limit, b.corrected, b.epoch + k
end
local wait, rl, rc, re = take(load(v, 1), R, 1)
local tl, tc, te = 0, 0, 0
if tokens > 0 then
  local tw
  tw, tl, tc, te = take(load(v, 9), T, tokens)
  wait = max(wait, tw)
end
-- A rate of 0 gives an infinite wait: the Go side reads the cap as the
-- longest duration.
if wait ~= wait or wait > 1e16 then wait = 1e16 end
wait = max(wait, 0)
local hinted = 0
local blocked = pos(v[1]) - now
if blocked > wait then wait, hinted = blocked, 1 end
if wait >= maxw then
  -- The caller gives up: it must not lengthen the queue of those who wait.
  n = 0
  keep(ttl, blocked)
  return {out(wait), hinted, 0, 0, 0, 0, 0, 0}
end
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
-- The dimensions reported, each with its fields and where its arguments
-- start; the HMGET reads 'blocked' and then their fields.
local dims, list = {}, {'blocked'}
for i, f in ipairs({R, T}) do
  if a[8 * i - 7] > 0 then
    dims[#dims + 1] = {f, 8 * i - 8, #list}
    for j = 1, 8 do list[#list + 1] = f[j] end
  end
end
local v = redis.call('HMGET', key, unpack(list))
for _, dim in ipairs(dims) do
  local f, i, b = dim[1], dim[2], load(v, dim[3])
  local limit, remaining, rate, window, reset = a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5]
  local ml, mc, me = a[i + 6], a[i + 7], a[i + 8]
  advance(b, now)
  if b.limit ~= limit or (b.window == 0) ~= (window == 0) then
    -- A new limit: the levels before no longer compare, but the queue's
    -- debt stays owed.
    b.level = remaining + min(b.level, 0)
    b.limit, b.rate, b.window, b.reset, b.at, b.corrected, b.epoch = limit, rate, window, now + reset, now, 0, b.epoch + 1
  elseif window == 0 or me == 0 or me == b.epoch then
    if window ~= 0 then b.window, b.reset = window, now + reset else b.rate = rate end
    local c = b.level - remaining
    if me == b.epoch then c = ml - remaining - (b.corrected - mc) end
    if c > 0 then b.level, b.corrected = b.level - c, b.corrected + c end
  end
  put(f[1], b.limit) put(f[2], b.level) put(f[3], b.rate) put(f[4], b.window)
  put(f[5], b.reset) put(f[6], b.at) put(f[7], b.corrected) put(f[8], b.epoch)
end
local block, blocked = a[17], pos(v[1])
if block > 0 and now + block > blocked then
  blocked = now + block
  put('blocked', blocked)
end
-- Never shorter than a block still running, whoever set it.
keep(a[18], blocked - now)
return 1
`)
