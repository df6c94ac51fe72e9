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
  -- id|lost_at|seq|born_at; a marker of the earlier format has no born_at
  local function split(text)
    local id, lost, seq, born = string.match(text, '^([^|]*)|([^|]*)|(%d+)|?([^|]*)$')
    return id, lost, tonumber(seq), born
  end
  local function marker(id, lost, seq, born)
    return id .. '|' .. lost .. '|' .. string.format('%d', seq) .. '|' .. (born or '')
  end
  local stamp = string.format('%.17g', now)
  local stored = redis.call('GET', key)
  local epoch, found = nil, 0
  if not stored then
    if known == '' then
      epoch = marker(new_id, '', 1, stamp)
    else
      local _, _, kseq = split(known)
      epoch, found = marker(new_id, stamp, kseq + 1), 1
    end
  else
    local sid, slost, sseq, sborn = split(stored)
    if known == '' then
      epoch = marker(sid, slost, sseq + 1, sborn)
    else
      local kid, _, kseq = split(known)
      if sid ~= kid then
        if slost ~= '' then
          epoch = marker(sid, slost, math.max(sseq, kseq) + 1, sborn)
        else
          epoch, found = marker(sid, stamp, math.max(sseq, kseq) + 1), 1
        end
      elseif sseq < kseq then
        epoch, found = marker(sid, stamp, kseq + 1), 1
      else
        epoch = marker(sid, slost, sseq + 1, sborn)
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
-- Returns {outcome, token, result, fingerprint, epoch, found_loss, store_lost, store_new}.
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
    return {'conflict', false, false, stored_fp, epoch, found, 0, 0}
  end
  if state == 'completed' then
    return {'replay', false, redis.call('HGET', KEYS[1], 'result'), stored_fp, epoch, found, 0, 0}
  end
  if now < tonumber(stored[3]) then
    return {'in_progress', false, false, stored_fp, epoch, found, 0, 0}
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
return {outcome, token, false, fingerprint, epoch, found, suspect, newborn}

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
