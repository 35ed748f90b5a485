-- A ring append's reservation (server/redis_store/ring_append.h): reads the
-- ring's size and reserves rows from its cursor in one atomic step, so the
-- rows are placed by the size they were reserved at.
-- KEYS[1] meta, KEYS[2] counters (same slot: {dict_id}).
-- ARGV[1] the cursor counter's name; ARGV[2] the rows to reserve; ARGV[3]
-- the most counters a dict may hold; ARGV[4] the dict's name.
-- Returns {cursor after (decimal string), batch dim 0}.
-- Errors: TDNODICT if the dict was deleted or renamed; TDRINGSIZE <dim 0>
-- if the dict has no batch dims or rows is outside 1..dim 0; TDLIMIT
-- <count> for a new counter beyond the limit; TDOVERFLOW if the add would
-- leave int64. Nothing changes on an error.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 or
    redis.call('HGET', KEYS[1], 'name') ~= ARGV[4] then
  return redis.error_reply('TDNODICT the dict was deleted')
end
-- batch_shape is "d0,d1,..." ("" without batch dims).
local batch = redis.call('HGET', KEYS[1], 'batch_shape') or ''
local size = tonumber(string.match(batch, '^(%d+)') or '0')
local rows = tonumber(ARGV[2])
if size == 0 or rows < 1 or rows > size then
  return redis.error_reply('TDRINGSIZE ' .. size)
end
local name = ARGV[1]
if redis.call('HEXISTS', KEYS[2], name) == 0 then
  local count = redis.call('HLEN', KEYS[2])
  if count >= tonumber(ARGV[3]) then
    return redis.error_reply('TDLIMIT ' .. count)
  end
end
-- HINCRBY does the 64-bit arithmetic and refuses an overflow unchanged.
local ok = pcall(redis.call, 'HINCRBY', KEYS[2], name, ARGV[2])
if not ok then
  return redis.error_reply('TDOVERFLOW ' .. name)
end
return {redis.call('HGET', KEYS[2], name), size}
