-- Renames a dict in the catalog atomically.
-- KEYS[1] catalog hash. ARGV[1] old name, ARGV[2] new name, ARGV[3] the
-- id the old name must still mean ('' for any), ARGV[4] the schema-change
-- channel, on which the id is published.
-- Returns the dict id. Errors: TDNOTFOUND, TDEXISTS.
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id or (ARGV[3] ~= '' and id ~= ARGV[3]) then
  return redis.error_reply('TDNOTFOUND ' .. ARGV[1])
end
if ARGV[1] == ARGV[2] then
  return id
end
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  return redis.error_reply('TDEXISTS ' .. ARGV[2])
end
redis.call('HSET', KEYS[1], ARGV[2], id)
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[4], id)
return id
