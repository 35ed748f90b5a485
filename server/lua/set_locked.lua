-- Locks or unlocks a dict: the meta's `locked` field, which commit_leaves.lua
-- and delete_leaves.lua check in the same step as the change they refuse.
-- KEYS[1] meta. ARGV[1] '1' to lock, '0' to unlock; ARGV[2] the
-- schema-change channel, ARGV[3] the dict's id (published on it, so every
-- client's schema copy learns the new state), ARGV[4] the dict's name.
-- Returns the schema version after the change (unchanged if the dict was
-- already in that state). Errors: TDNODICT if the dict was deleted or renamed.
-- The dict must exist under the name the caller knows it by: a renamed
-- dict (same id, new name) is not reached through its old name.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 or
    redis.call('HGET', KEYS[1], 'name') ~= ARGV[4] then
  return redis.error_reply('TDNODICT the dict was deleted')
end
local was = redis.call('HEXISTS', KEYS[1], 'locked') == 1
local want = ARGV[1] == '1'
if was == want then
  return tonumber(redis.call('HGET', KEYS[1], 'version'))
end
if want then
  redis.call('HSET', KEYS[1], 'locked', '1')
else
  redis.call('HDEL', KEYS[1], 'locked')
end
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[2], ARGV[3])
return version
