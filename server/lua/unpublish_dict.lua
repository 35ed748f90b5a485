-- First step of deleting a dict: take its name out of the catalog, but only
-- if the name still means this dict id, and record the deletion in the
-- catalog under the reserved field '/deleting/<id>' (names cannot start
-- with '/') so that an interrupted deletion is finished by the sweeper.
-- KEYS[1] catalog. ARGV[1] name, ARGV[2] id, ARGV[3] the schema-change
-- channel, on which the id is published (watchers learn the dict is gone).
-- Returns 1, or 0 if the name is gone or names another dict now.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], '/deleting/' .. ARGV[2], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[2])
return 1
