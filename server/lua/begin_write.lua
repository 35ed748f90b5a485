-- Reserves a new generation for a leaf about to be written.
-- KEYS[1] meta hash, KEYS[2] pending hash (same slot: {dict_id}).
-- ARGV[1] pending record (server/redis_store/leaf_record_text.h; its gen is the field name).
-- Returns the generation. Fails with TDNODICT if the dict was deleted (or is
-- being deleted), so a write into a deleted dict never recreates its meta.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return redis.error_reply('TDNODICT the dict was deleted')
end
local gen = redis.call('HINCRBY', KEYS[1], 'next_gen', 1)
redis.call('HSET', KEYS[2], tostring(gen), ARGV[1])
return gen
