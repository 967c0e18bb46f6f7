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
//
// The scripts run on every call of every process, on the server's one
// thread, so they are written to spend little of it: no table or closure
// per bucket, no write of a field the call leaves as it was (it reads back
// the same, garbage included), and the time written as the digits TIME
// gives rather than as a number Redis would format with %.17g. The model
// tests hold them to the in-process model, bit for bit.
const pacerLib = `
local key = KEYS[1]
local tonumber, huge, floor, min, max = tonumber, math.huge, math.floor, math.min, math.max
-- out is x to write or return exactly: an integer as a number, which every
-- Redis writes as its digits (a reply makes it an integer), anything else
-- as %.17g, which reads back exactly but costs a microsecond, and which
-- Redis's own conversion of a Lua number would not give every version.
-- (x % 1 is Lua's own arithmetic, cheaper than a call of math.floor; it
-- is NaN for an infinity.)
local function out(x)
  if x % 1 == 0 and x > -9e15 and x < 9e15 then return x end
  return string.format('%.17g', x)
end
-- set holds the HSET's arguments, n of them.
local set, n = {}, 0
-- keep writes set and sets the key's TTL: ttl milliseconds, or longer
-- while a wait of us microseconds still binds a caller, up to two days,
-- twice the furthest reset or Retry-After the Pacer believes: garbage in
-- the hash cannot keep a key for years.
local function keep(ttl, us)
  if n > 0 then redis.call('HSET', key, unpack(set, 1, n)) end
  redis.call('PEXPIRE', key, math.ceil(max(ttl, min(us, 1728e8) / 1000)))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- nows is now as Redis would write it: the seconds, then the microseconds
-- in six digits.
local nows = t[1] .. string.sub('00000', #t[2]) .. t[2]
`

// pacerReserveScript takes one request, and ARGV[1] tokens, from the
// buckets in KEYS[1], unless the wait would be ARGV[3] microseconds or
// more, and keeps the key ARGV[2] milliseconds at least. It returns the
// wait in microseconds, 1 when the wait is a Retry-After's, and the two
// marks (level, corrected, epoch; zeros when nothing was taken): integers
// as they are, other numbers as strings, since Redis turns a Lua number in
// a reply into an integer.
var pacerReserveScript = redis.NewScript(pacerLib + `
local tokens, ttl, maxw = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not (tokens and ttl and maxw and tokens >= 0 and tokens < huge and ttl >= 1 and ttl < huge and
    maxw >= 0 and maxw < huge) then
  return redis.error_reply('ERR retryredis: bad arguments')
end
local v
if tokens > 0 then
  v = redis.call('HMGET', key, 'blocked', 'r:limit', 'r:level', 'r:rate', 'r:window', 'r:reset', 'r:at',
    'r:corrected', 'r:epoch', 't:limit', 't:level', 't:rate', 't:window', 't:reset', 't:at', 't:corrected', 't:epoch')
else
  v = redis.call('HMGET', key, 'blocked', 'r:limit', 'r:level', 'r:rate', 'r:window', 'r:reset', 'r:at',
    'r:corrected', 'r:epoch')
end
-- take reserves amount from the bucket whose fields start at v[i + 1] and
-- are named fl (level), fr (reset), fa (at) and fe (epoch), and returns the
-- wait in microseconds and the mark.
local function take(i, amount, fl, fr, fa, fe)
  local limit = tonumber(v[i + 1])
  if not (limit and limit > 0 and limit < huge) then return 0, 0, 0, 0 end
  local level, rate, window = tonumber(v[i + 2]), tonumber(v[i + 3]), tonumber(v[i + 4])
  local reset, at, corrected, epoch = tonumber(v[i + 5]), tonumber(v[i + 6]), tonumber(v[i + 7]), tonumber(v[i + 8])
  if not (level and level > -huge and level < huge) then level = 0 end
  if not (rate and rate >= 0 and rate < huge) then rate = 0 end
  if not (window and window >= 0 and window < huge) then window = 0 end
  if not (reset and reset >= 0 and reset < huge) then reset = 0 end
  if not (at and at >= 0 and at < huge) then at = 0 end
  if not (corrected and corrected >= 0 and corrected < huge) then corrected = 0 end
  if not (epoch and epoch >= 0 and epoch < huge) then epoch = 0 end
  -- Advance to now.
  if now > at then
    if window == 0 then
      level = min(limit, level + rate * (now - at) / 1e6)
    elseif now >= reset then
      local k = floor((now - reset) / window) + 1
      level = min(min(level, 0) + k * limit, limit)
      reset = reset + k * window
      epoch = epoch + k
      set[n + 1], set[n + 2], set[n + 3], set[n + 4] = fr, out(reset), fe, out(epoch)
      n = n + 4
    end
    set[n + 1], set[n + 2] = fa, nows
    n = n + 2
  end
  level = level - min(amount, limit)
  set[n + 1], set[n + 2] = fl, out(level)
  n = n + 2
  if level >= 0 then return 0, level, corrected, epoch end
  if window == 0 then return -level / rate * 1e6, 0, corrected, epoch end
  local k = math.ceil(-level / limit)
  return reset - now + (k - 1) * window, level + k * limit, corrected, epoch + k
end
local wait, rl, rc, re = take(1, 1, 'r:level', 'r:reset', 'r:at', 'r:epoch')
local tl, tc, te = 0, 0, 0
if tokens > 0 then
  local tw
  tw, tl, tc, te = take(9, tokens, 't:level', 't:reset', 't:at', 't:epoch')
  wait = max(wait, tw)
end
-- A rate of 0 gives an infinite wait: the Go side reads the cap as the
-- longest duration.
if wait ~= wait or wait > 1e16 then wait = 1e16 end
wait = max(wait, 0)
local hinted = 0
local blocked = tonumber(v[1])
if not (blocked and blocked >= 0 and blocked < huge) then blocked = 0 end
blocked = blocked - now
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
  local x = tonumber(ARGV[i])
  if not (x and x > -huge and x < huge) then return redis.error_reply('ERR retryredis: bad arguments') end
  a[i] = x
end
if a[18] < 1 then return redis.error_reply('ERR retryredis: bad arguments') end
-- The HMGET reads 'blocked' and then the fields of the dimensions reported.
local v
if a[1] > 0 and a[9] > 0 then
  v = redis.call('HMGET', key, 'blocked', 'r:limit', 'r:level', 'r:rate', 'r:window', 'r:reset', 'r:at',
    'r:corrected', 'r:epoch', 't:limit', 't:level', 't:rate', 't:window', 't:reset', 't:at', 't:corrected', 't:epoch')
elseif a[1] > 0 then
  v = redis.call('HMGET', key, 'blocked', 'r:limit', 'r:level', 'r:rate', 'r:window', 'r:reset', 'r:at',
    'r:corrected', 'r:epoch')
elseif a[9] > 0 then
  v = redis.call('HMGET', key, 'blocked', 't:limit', 't:level', 't:rate', 't:window', 't:reset', 't:at',
    't:corrected', 't:epoch')
else
  v = redis.call('HMGET', key, 'blocked')
end
-- put adds field p..f to the HSET when its value x differs from x0, what
-- the hash reads as: a field that keeps its value is not written.
local function put(p, f, x, x0)
  if x ~= x0 then
    set[n + 1], set[n + 2] = p .. f, out(x)
    n = n + 2
  end
end
-- learn moves the bucket whose fields start at v[o + 1], named after
-- prefix p, to the report at a[i + 1].
local function learn(o, i, p)
  local limit0, level0, rate0 = tonumber(v[o + 1]), tonumber(v[o + 2]), tonumber(v[o + 3])
  local window0, reset0, at0 = tonumber(v[o + 4]), tonumber(v[o + 5]), tonumber(v[o + 6])
  local corrected0, epoch0 = tonumber(v[o + 7]), tonumber(v[o + 8])
  if not (limit0 and limit0 >= 0 and limit0 < huge) then limit0 = 0 end
  if not (level0 and level0 > -huge and level0 < huge) then level0 = 0 end
  if not (rate0 and rate0 >= 0 and rate0 < huge) then rate0 = 0 end
  if not (window0 and window0 >= 0 and window0 < huge) then window0 = 0 end
  if not (reset0 and reset0 >= 0 and reset0 < huge) then reset0 = 0 end
  if not (at0 and at0 >= 0 and at0 < huge) then at0 = 0 end
  if not (corrected0 and corrected0 >= 0 and corrected0 < huge) then corrected0 = 0 end
  if not (epoch0 and epoch0 >= 0 and epoch0 < huge) then epoch0 = 0 end
  local limit, level, rate, window, reset, at, corrected, epoch =
    limit0, level0, rate0, window0, reset0, at0, corrected0, epoch0
  -- Advance to now.
  if limit ~= 0 and now > at then
    if window == 0 then
      level = min(limit, level + rate * (now - at) / 1e6)
    elseif now >= reset then
      local k = floor((now - reset) / window) + 1
      level = min(min(level, 0) + k * limit, limit)
      reset = reset + k * window
      epoch = epoch + k
    end
    at = now
  end
  local nlimit, remaining, nrate, nwindow, nreset = a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5]
  local ml, mc, me = a[i + 6], a[i + 7], a[i + 8]
  if limit ~= nlimit or (window == 0) ~= (nwindow == 0) then
    -- A new limit: the levels before no longer compare, but the queue's
    -- debt stays owed.
    level = remaining + min(level, 0)
    limit, rate, window, reset, at, corrected, epoch = nlimit, nrate, nwindow, now + nreset, now, 0, epoch + 1
  elseif nwindow ~= 0 and window ~= 0 and now + nreset > reset + max(window / 2, 1e6) then
    -- The server's next window, while the bucket's end, read from whole
    -- seconds, runs late: begin the new window now, and compare what is
    -- left with its whole quota, not with the old window's level. (Half a
    -- window, and never less than the second resets are rounded to.)
    level = min(level, 0) + limit
    window, reset, epoch = nwindow, now + nreset, epoch + 1
    local c = level - remaining
    if c > 0 then level, corrected = level - c, corrected + c end
  elseif nwindow == 0 or me == 0 or me == epoch then
    if nwindow ~= 0 then window, reset = nwindow, now + nreset else rate = nrate end
    local c = level - remaining
    if me == epoch then c = ml - remaining - (corrected - mc) end
    if c > 0 then level, corrected = level - c, corrected + c end
  end
  put(p, 'limit', limit, limit0) put(p, 'level', level, level0) put(p, 'rate', rate, rate0)
  put(p, 'window', window, window0) put(p, 'reset', reset, reset0)
  -- at is now or as it was.
  if at ~= at0 then
    set[n + 1], set[n + 2] = p .. 'at', nows
    n = n + 2
  end
  put(p, 'corrected', corrected, corrected0) put(p, 'epoch', epoch, epoch0)
end
if a[1] > 0 then learn(1, 0, 'r:') end
if a[9] > 0 then learn(a[1] > 0 and 9 or 1, 8, 't:') end
local block, blocked = a[17], tonumber(v[1])
if not (blocked and blocked >= 0 and blocked < huge) then blocked = 0 end
if block > 0 and now + block > blocked then
  blocked = now + block
  set[n + 1], set[n + 2] = 'blocked', out(blocked)
  n = n + 2
end
-- Never shorter than a block still running, whoever set it.
keep(a[18], blocked - now)
return 1
`)
