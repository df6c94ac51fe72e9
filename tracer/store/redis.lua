-- Scripts of RedisStore, loaded by name. Each runs atomically on the server and
-- implements the same rules as _rules.py. The caller passes `now` (its wall clock,
-- epoch seconds) so every backend decides on the same clock; expiry instants live
-- inside the records. Redis key TTLs (PEXPIRE) only collect garbage: they are set
-- `gc_margin_s` past the instant a record is forgotten.
--
-- Idempotency record: hash {state, fingerprint, token, lease_until, forget_at, result}.
-- Guard state: hash {kind, text, count, forget_at}.
-- Numbers are written with %.17g so epoch seconds keep their sub-millisecond digits.

-- name: epoch
-- Not a script of its own: prepended to `claim` and `complete`, which check and move the
-- store's epoch marker in the same atomic step (the rules of _rules.advance_epoch).
-- known: this client's last view ('' if none). Returns the marker written and 1 when
-- this call found a loss.
local function advance_epoch(key, known, now, new_id)
  -- id|lost_at|seq|born_at|runs, runs = 'run:base;run:base' (oldest first, at most 8);
  -- a marker of an earlier format lacks the last fields
  local function split(text)
    local id, lost, seq, born, runs = string.match(text, '^([^|]*)|([^|]*)|(%d+)|?([^|]*)|?([^|]*)$')
    local list = {}
    for run, base in string.gmatch(runs or '', '([^;:]+):(%d+)') do
      list[#list + 1] = {run, tonumber(base)}
    end
    return id, lost, tonumber(seq), born, list
  end
  local function marker(id, lost, seq, born, runs)
    local parts = {}
    for i = math.max(1, #runs - 7), #runs do
      parts[#parts + 1] = runs[i][1] .. ':' .. string.format('%d', runs[i][2])
    end
    return id .. '|' .. lost .. '|' .. string.format('%d', seq) .. '|' .. (born or '') .. '|'
      .. table.concat(parts, ';')
  end
  local function current(runs)
    return #runs > 0 and runs[#runs][1] or ''
  end
  -- a restart since the run the client saw (or any kept, if it is older) came back behind it
  local function restarted_behind(runs, krun, kseq)
    if krun == current(runs) then
      return false
    end
    local from = 1
    for i = 1, #runs do
      if runs[i][1] == krun then
        from = i + 1
      end
    end
    for i = from, #runs do
      if runs[i][2] < kseq then
        return true
      end
    end
    return false
  end
  local stamp = string.format('%.17g', now)
  -- this server process: a restart (an AOF or RDB reload, a promoted replica) changes it
  local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  local stored = redis.call('GET', key)
  local epoch, found = nil, 0
  if not stored then
    if known == '' then
      epoch = marker(new_id, '', 1, stamp, {{run, 0}})
    else
      local _, _, kseq = split(known)
      epoch, found = marker(new_id, stamp, kseq + 1, '', {{run, 0}}), 1
    end
  else
    local sid, slost, sseq, sborn, sruns = split(stored)
    if current(sruns) ~= run then
      -- the first step since the server restarted: it came back at sseq, and no live
      -- client can vouch for what the others wrote last, so it is suspect as a new store
      sruns[#sruns + 1] = {run, sseq}
      sborn = stamp
    end
    if known == '' then
      epoch = marker(sid, slost, sseq + 1, sborn, sruns)
    else
      local kid, _, kseq, _, kruns = split(known)
      if sid ~= kid then
        if slost ~= '' then
          epoch = marker(sid, slost, math.max(sseq, kseq) + 1, sborn, sruns)
        else
          epoch, found = marker(sid, stamp, math.max(sseq, kseq) + 1, sborn, sruns), 1
        end
      elseif sseq < kseq or restarted_behind(sruns, current(kruns), kseq) then
        epoch, found = marker(sid, stamp, math.max(sseq, kseq) + 1, sborn, sruns), 1
      else
        epoch = marker(sid, slost, sseq + 1, sborn, sruns)
      end
    end
  end
  redis.call('SET', key, epoch)
  local _, lost_at, _, born_at = split(epoch)
  return epoch, found, tonumber(lost_at), tonumber(born_at)
end

-- name: claim
-- KEYS[1] record, KEYS[2] epoch marker; ARGV fingerprint, now, lease_s, ttl_s, new_token,
-- gc_margin_s, known epoch, new epoch id, newborn grace_s.
-- Returns {outcome, token, result, fingerprint, epoch, found_loss, store_lost, store_new,
-- suspect_for_s}.
local fingerprint, token = ARGV[1], ARGV[5]
local now, lease_s, ttl_s, margin = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local epoch, found, lost_at, born_at = advance_epoch(KEYS[2], ARGV[7], now, ARGV[8])
local stored = redis.call('HMGET', KEYS[1], 'state', 'fingerprint', 'lease_until', 'forget_at')
local state, stored_fp = stored[1], stored[2]
if state and now >= tonumber(stored[4]) then
  state = false
end
if state then
  -- '*': claimed while the store was suspect of a loss; it conflicts with nobody
  if stored_fp ~= fingerprint and stored_fp ~= '*' then
    return {'conflict', false, false, stored_fp, epoch, found, 0, 0, false}
  end
  if state == 'completed' then
    local result = redis.call('HGET', KEYS[1], 'result')
    return {'replay', false, result, stored_fp, epoch, found, 0, 0, false}
  end
  if now < tonumber(stored[3]) then
    return {'in_progress', false, false, stored_fp, epoch, found, 0, 0, false}
  end
end
local outcome = state and 'takeover' or 'acquired'
local lease_until = now + lease_s
local forget_at = lease_until + ttl_s
local suspect = (outcome == 'acquired' and lost_at and now < lost_at + ttl_s) and 1 or 0
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'in_flight', 'fingerprint', suspect == 1 and '*' or fingerprint,
  'token', token, 'lease_until', string.format('%.17g', lease_until),
  'forget_at', string.format('%.17g', forget_at))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((forget_at - now + margin) * 1000)))
local newborn = (outcome == 'acquired' and not lost_at and born_at
  and now < born_at + tonumber(ARGV[9])) and 1 or 0
-- how long the store has been suspect (a reply's numbers are integers: sent as text)
local age = false
if suspect == 1 then
  age = string.format('%.17g', now - lost_at)
elseif newborn == 1 then
  age = string.format('%.17g', now - born_at)
end
return {outcome, token, false, fingerprint, epoch, found, suspect, newborn, age}

-- name: complete
-- KEYS[1] record, KEYS[2] epoch marker; ARGV token, result, now, ttl_s, gc_margin_s,
-- known epoch, new epoch id. Returns {stored (0|1), epoch, found_loss}.
local now, ttl_s, margin = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local epoch, found = advance_epoch(KEYS[2], ARGV[6], now, ARGV[7])
local stored = redis.call('HMGET', KEYS[1], 'state', 'token', 'forget_at', 'fingerprint')
if stored[1] ~= 'in_flight' or stored[2] ~= ARGV[1] or now >= tonumber(stored[3]) then
  return {0, epoch, found}
end
local forget_at = now + ttl_s
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'completed', 'fingerprint', stored[4], 'result', ARGV[2],
  'lease_until', '0', 'forget_at', string.format('%.17g', forget_at))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((ttl_s + margin) * 1000)))
return {1, epoch, found}

-- name: release
-- KEYS[1] record; ARGV token, now
local stored = redis.call('HMGET', KEYS[1], 'state', 'token', 'forget_at')
if stored[1] == 'in_flight' and stored[2] == ARGV[1] and tonumber(ARGV[2]) < tonumber(stored[3]) then
  redis.call('DEL', KEYS[1])
end
return 0

-- name: extend
-- KEYS[1] record; ARGV token, now, lease_s, gc_margin_s
local now, lease_s, margin = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local stored = redis.call('HMGET', KEYS[1], 'state', 'token', 'lease_until', 'forget_at')
if stored[1] ~= 'in_flight' or stored[2] ~= ARGV[1] or now >= tonumber(stored[4]) then
  return 0
end
-- keep the record remembered for as long after the new lease as after the old one
local remembered_s = tonumber(stored[4]) - tonumber(stored[3])
local lease_until = now + lease_s
local forget_at = lease_until + remembered_s
redis.call('HSET', KEYS[1], 'lease_until', string.format('%.17g', lease_until),
  'forget_at', string.format('%.17g', forget_at))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((forget_at - now + margin) * 1000)))
return 1

-- name: guard_write
-- KEYS[1] guard state; ARGV kind, operation (incr|answer|put), operand, now, ttl_s, gc_margin_s
-- Returns {'ok', count} or {'kind', stored_kind} when the name holds another kind.
local kind, operation, operand = ARGV[1], ARGV[2], ARGV[3]
local now, ttl_s, margin = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local stored = redis.call('HMGET', KEYS[1], 'kind', 'text', 'count', 'forget_at')
local live = stored[1] and now < tonumber(stored[4])
if live and stored[1] ~= kind then
  return {'kind', stored[1]}
end
local text, count = '', 0
if operation == 'incr' then
  count = (live and tonumber(stored[3]) or 0) + tonumber(operand)
elseif operation == 'answer' then
  text = operand
  count = (live and stored[2] == operand) and tonumber(stored[3]) + 1 or 1
else
  text = operand
end
redis.call('HSET', KEYS[1], 'kind', kind, 'text', text, 'count', string.format('%d', count),
  'forget_at', string.format('%.17g', now + ttl_s))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil((ttl_s + margin) * 1000)))
return {'ok', count}

-- name: guard_read
-- KEYS[1] guard state; ARGV now. Returns {kind, text, count} or nil when absent.
local stored = redis.call('HMGET', KEYS[1], 'kind', 'text', 'count', 'forget_at')
if not stored[1] or tonumber(ARGV[1]) >= tonumber(stored[4]) then
  return false
end
return {stored[1], stored[2], tonumber(stored[3])}
