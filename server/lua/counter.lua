-- One operation on a dict's counter, atomic with respect to every other.
-- KEYS[1] meta, KEYS[2] counters (same slot: {dict_id}).
-- ARGV[1] 'add', 'cas' or 'get'; ARGV[2] the counter's name; ARGV[3] the
-- delta (add) or the expected value (cas); ARGV[4] the new value (cas);
-- ARGV[5] the most counters a dict may hold; ARGV[6] the dict's name. A counter never set is 0.
-- Returns {value, swapped, version}: add: the new value; cas: the value
-- now, and 1 if it swapped; get: the value. `version` is the dict's schema
-- version, read in the same step: the version the call reports
-- (docs/protocol.md, "Causal schema reads"), without a round trip of its own.
-- Errors: TDNODICT if the dict was deleted or renamed (checked first, so a deleted
-- dict's counters are never recreated); TDLIMIT <count> for a new counter
-- beyond the limit; TDOVERFLOW if the add would leave int64.
-- The dict must exist under the name the caller knows it by: a renamed
-- dict (same id, new name) is not reached through its old name.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 or
    redis.call('HGET', KEYS[1], 'name') ~= ARGV[6] then
  return redis.error_reply('TDNODICT the dict was deleted')
end
local op, name = ARGV[1], ARGV[2]
local function answer(value, swapped)
  return {value, swapped, redis.call('HGET', KEYS[1], 'version')}
end
local current = redis.call('HGET', KEYS[2], name)
if op == 'get' then
  return answer(current or '0', 0)
end
-- A counter that does not exist yet may be created only below the limit.
local function over_limit()
  if current then return nil end
  local count = redis.call('HLEN', KEYS[2])
  if count >= tonumber(ARGV[5]) then
    return redis.error_reply('TDLIMIT ' .. count)
  end
  return nil
end
if op == 'add' then
  local refused = over_limit()
  if refused then return refused end
  -- HINCRBY does the 64-bit arithmetic (Lua numbers are doubles) and
  -- refuses an overflow without changing the value.
  local ok = pcall(redis.call, 'HINCRBY', KEYS[2], name, ARGV[3])
  if not ok then
    return redis.error_reply('TDOVERFLOW ' .. name)
  end
  -- Read back as Redis' decimal string: a Lua number (a double) would
  -- round values past 2^53.
  return answer(redis.call('HGET', KEYS[2], name), 0)
end
-- cas: compared as the decimal strings Redis stores ('0' when absent).
if (current or '0') == ARGV[3] then
  local refused = over_limit()
  if refused then return refused end
  redis.call('HSET', KEYS[2], name, ARGV[4])
  return answer(ARGV[4], 1)
end
return answer(current or '0', 0)
