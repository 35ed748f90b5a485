-- Updates a pending write's record (its expiry) only while it still exists.
-- KEYS[1] pending hash. ARGV[1] generation, ARGV[2] new record.
-- Returns 1, or 0 when the entry is gone (swept or the dict deleted): the
-- writer must then abort instead of recreating it.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
