-- Sets and removes a dict's attributes in one step.
-- KEYS[1] meta, KEYS[2] attrs (same slot: {dict_id}).
-- ARGV[1] the schema-change channel, ARGV[2] the dict's id, ARGV[3] the most
-- attributes a dict may hold, ARGV[4] the dict's name, ARGV[5] n (names to
-- set), then n name/value pairs, then the names to remove. tdstored has checked names and sizes.
-- Returns the schema version after the change.
-- Errors: TDNODICT if the dict was deleted or renamed; TDLIMIT <count> if the dict
-- would hold more attributes than allowed (then nothing changes).
-- The dict must exist under the name the caller knows it by: a renamed
-- dict (same id, new name) is not reached through its old name.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 or
    redis.call('HGET', KEYS[1], 'name') ~= ARGV[4] then
  return redis.error_reply('TDNODICT the dict was deleted')
end
local n = tonumber(ARGV[5])
local count = redis.call('HLEN', KEYS[2])
for i = 6 + 2 * n, #ARGV do
  count = count - redis.call('HEXISTS', KEYS[2], ARGV[i])
end
for i = 0, n - 1 do
  count = count + 1 - redis.call('HEXISTS', KEYS[2], ARGV[6 + 2 * i])
end
if count > tonumber(ARGV[3]) then
  return redis.error_reply('TDLIMIT ' .. count)
end
for i = 6 + 2 * n, #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
end
for i = 0, n - 1 do
  redis.call('HSET', KEYS[2], ARGV[6 + 2 * i], ARGV[7 + 2 * i])
end
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[1], ARGV[2])
return version
