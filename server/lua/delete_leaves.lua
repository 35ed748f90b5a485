-- Removes leaves, each named exactly or by a prefix (its whole subtree).
-- KEYS[1] meta, KEYS[2] leaves, KEYS[3] pending (same slot: {dict_id}).
-- ARGV[1] the schema-change channel, ARGV[2] the dict's id (published on
-- it); then the encoded paths. All are checked before anything is removed.
-- Returns {version, path_1, record_1, ...} of the removed leaves. Their
-- generations are parked in the pending hash as already expired, as in
-- commit_leaves.lua: the caller deletes the blocks, then the entries. A
-- record dict's leaves share one generation (';rec=' in their records): it
-- is parked only with the last leaf that names it, and a leaf removed
-- before that comes back with the record 'shared' (no blocks to delete).
-- Errors: TDNODICT if the dict was deleted; TDNOTFOUND <path> if a path
-- matches nothing; TDLOCKED if the dict is locked (set_locked.lua).
--@include park.lua
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return redis.error_reply('TDNODICT the dict was deleted')
end
if redis.call('HEXISTS', KEYS[1], 'locked') == 1 then
  return redis.error_reply('TDLOCKED the dict is locked')
end
local all = redis.call('HGETALL', KEYS[2])
local doomed = {}
for i = 3, #ARGV do
  local p = ARGV[i]
  local hit = false
  for i = 1, #all, 2 do
    local f = all[i]
    if f == p or string.sub(f, 1, #p + 1) == p .. '/' then
      doomed[f] = all[i + 1]
      hit = true
    end
  end
  if not hit then
    return redis.error_reply('TDNOTFOUND ' .. p)
  end
end
for f, _ in pairs(doomed) do
  redis.call('HDEL', KEYS[2], f)
end
local left = redis.call('HVALS', KEYS[2])
local out = {0}
for f, rec in pairs(doomed) do
  out[#out + 1] = f
  out[#out + 1] = park(KEYS[3], rec, left)
end
out[1] = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[1], ARGV[2])
return out
