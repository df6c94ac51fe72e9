-- Scripts of the Redis fleet state (retry budgets, circuit breakers), loaded by name.
-- Each runs atomically on the server and implements the rules of _fleet.py.
--
-- The clock: ARGV[1] is `now` in epoch seconds, or '' to use the server's TIME, so
-- every worker of a fleet decides on one clock. (Redis 7 replicates a script's
-- effects, not the script, so reading TIME before writing is allowed.)
--
-- Windows are sorted sets scored by instant; members are unique through a per-service
-- sequence. A window ending at now holds the members with now - window_s < score.
-- Breaker: hash {state, open_until, generation}; probes: sorted set token -> lease end.
-- Numbers go back to Python as strings (%.17g): Lua numbers would be cut to integers.
-- Key TTLs only collect garbage: windows live window_s + gc_margin_s after a write.

-- name: budget_first
-- KEYS firsts, seq; ARGV now, window_s, gc_margin_s
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local window, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.17g', now - window))
redis.call('ZADD', KEYS[1], string.format('%.17g', now), redis.call('INCR', KEYS[2]))
redis.call('PEXPIRE', KEYS[1], math.ceil((window + margin) * 1000))
redis.call('PEXPIRE', KEYS[2], math.ceil((window + margin) * 1000))
return string.format('%.17g', now)

-- name: budget_retry
-- KEYS firsts, retries, seq; ARGV now, ratio, floor_per_s, window_s, gc_margin_s
-- Returns {allowed 0|1, now, retries, first_attempts, limit}.
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local ratio, floor, window, margin = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local before = string.format('%.17g', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', before)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', before)
local firsts = redis.call('ZCARD', KEYS[1])
local retries = redis.call('ZCARD', KEYS[2])
local limit = ratio * firsts + floor * window
local allowed = 0
if retries + 1 <= limit then
  allowed = 1
  retries = retries + 1
  redis.call('ZADD', KEYS[2], string.format('%.17g', now), redis.call('INCR', KEYS[3]))
  redis.call('PEXPIRE', KEYS[2], math.ceil((window + margin) * 1000))
  redis.call('PEXPIRE', KEYS[3], math.ceil((window + margin) * 1000))
end
return {allowed, string.format('%.17g', now), retries, firsts, string.format('%.17g', limit)}

-- name: breaker_admit
-- KEYS breaker, probes; ARGV now, half_open_calls, probe_lease_s, token, open_s
-- Returns {allowed 0|1, state, now, probe token or false, generation, opened_half 0|1,
--          corrupt 0|1}. A breaker hash that does not read as one (someone else's write)
-- is reset to closed and reported (corrupt = 1): failing open. An open period ends
-- after open_s at most, whatever open_until says (the clock stepped back, or inf).
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local lease, open_s = tonumber(ARGV[3]), tonumber(ARGV[5])
local stored = redis.call('HMGET', KEYS[1], 'state', 'open_until', 'generation')
local state = stored[1] or 'closed'
local open_until = tonumber(stored[2] or '0')
local generation = tonumber(stored[3] or '0')
local corrupt = 0
if (state ~= 'closed' and state ~= 'open' and state ~= 'half_open')
    or not open_until or open_until ~= open_until or not generation then
  redis.call('DEL', KEYS[1], KEYS[2])
  state, open_until, generation, corrupt = 'closed', 0, 0, 1
end
local at = string.format('%.17g', now)
if state == 'closed' then
  return {1, 'closed', at, false, generation, 0, corrupt}
end
local opened_half = 0
if state == 'open' then
  if now < open_until and open_until <= now + open_s then
    return {0, 'open', at, false, generation, 0, 0}
  end
  generation = generation + 1
  opened_half = 1
  redis.call('HSET', KEYS[1], 'state', 'half_open', 'open_until', '0', 'generation', generation)
  redis.call('DEL', KEYS[2])
end
-- Leases ending after now + lease were taken before the clock stepped back: over too.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', at)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. string.format('%.17g', now + lease), '+inf')
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  return {0, 'half_open', at, false, generation, opened_half, 0}
end
redis.call('ZADD', KEYS[2], string.format('%.17g', now + lease), ARGV[4])
return {1, 'half_open', at, ARGV[4], generation, opened_half, 0}

-- name: breaker_record
-- KEYS breaker, probes, calls, failures, seq
-- ARGV now, probe token or '', failed 0|1, window_s, min_calls, failure_ratio, open_for_s,
--      gc_margin_s
-- Returns {state before, state after, now, corrupt 0|1} (corrupt: as in breaker_admit).
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local failed = ARGV[3] == '1'
local window, min_calls, ratio = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local open_for, margin = tonumber(ARGV[7]), tonumber(ARGV[8])
local at = string.format('%.17g', now)
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
local corrupt = 0
if state ~= 'closed' and state ~= 'open' and state ~= 'half_open' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  state, corrupt = 'closed', 1
end
local function leave(to)
  local until_ = to == 'open' and string.format('%.17g', now + open_for) or '0'
  redis.call('HSET', KEYS[1], 'state', to, 'open_until', until_)
  redis.call('HSETNX', KEYS[1], 'generation', '0')
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  return {state, to, at, corrupt}
end
if ARGV[2] ~= '' and redis.call('ZREM', KEYS[2], ARGV[2]) == 1 and state == 'half_open' then
  return leave(failed and 'open' or 'closed')
end
if state ~= 'closed' then
  return {state, state, at, corrupt}
end
local before = string.format('%.17g', now - window)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', before)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', before)
local member = redis.call('INCR', KEYS[5])
redis.call('ZADD', KEYS[3], at, member)
if failed then
  redis.call('ZADD', KEYS[4], at, member)
end
local ttl = math.ceil((window + margin) * 1000)
for i = 3, 5 do
  redis.call('PEXPIRE', KEYS[i], ttl)
end
local calls, failures = redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[4])
if calls >= min_calls and failures >= ratio * calls then
  return leave('open')
end
return {'closed', 'closed', at, corrupt}

-- name: breaker_release
-- KEYS probes; ARGV token
redis.call('ZREM', KEYS[1], ARGV[1])
return 0
