-- Renames a leaf, or a whole subtree, without moving data: block keys are
-- named by generation, not by path, so only the leaf records change.
-- KEYS[1] meta, KEYS[2] leaves, KEYS[3] pending (same slot: {dict_id}).
-- ARGV[1] the schema-change channel, ARGV[2] the dict's id (published on
-- it), ARGV[3] the encoded source path, ARGV[4] the encoded target path,
-- ARGV[5] '1' to replace what is at the target (its generations are parked
-- for deletion as in delete_leaves.lua), '0' to refuse it.
-- Returns {version, old_1, new_1, ...} for each leaf moved, then '', then
-- {path, record} of each leaf replaced at the target; 'shared' for the
-- record of one whose generation other leaves of a record dict still name
-- (parked only with the last, as in delete_leaves.lua).
-- Errors (nothing changes): TDNODICT (deleted), TDLOCKED (locked),
-- TDNOTFOUND (no leaf at or under the source), TDEXISTS <path> (the target
-- holds a leaf or subtree and ARGV[5] is '0'), TDCONFLICT <path> (the
-- target lies under a leaf, or one of the two paths holds the other).
--@include park.lua
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return redis.error_reply('TDNODICT the dict was deleted')
end
if redis.call('HEXISTS', KEYS[1], 'locked') == 1 then
  return redis.error_reply('TDLOCKED the dict is locked')
end
local from, to, replace = ARGV[3], ARGV[4], ARGV[5] == '1'
local function under(path, prefix)  -- path is prefix, or inside it
  return path == prefix or string.sub(path, 1, #prefix + 1) == prefix .. '/'
end
if under(to, from) or under(from, to) then
  return redis.error_reply('TDCONFLICT ' .. to)
end
local all = redis.call('HGETALL', KEYS[2])
local moving, replaced = {}, {}
for i = 1, #all, 2 do
  local f = all[i]
  if under(f, from) then
    moving[#moving + 1] = {f, all[i + 1]}
  elseif under(f, to) then
    if not replace then return redis.error_reply('TDEXISTS ' .. f) end
    replaced[#replaced + 1] = {f, all[i + 1]}
  elseif under(to, f) then
    -- The target would be nested in an existing leaf.
    return redis.error_reply('TDCONFLICT ' .. f)
  end
end
if #moving == 0 then
  return redis.error_reply('TDNOTFOUND ' .. from)
end
local out = {0}
for _, r in ipairs(replaced) do
  redis.call('HDEL', KEYS[2], r[1])
end
for _, m in ipairs(moving) do
  redis.call('HDEL', KEYS[2], m[1])
end
for _, m in ipairs(moving) do
  local target = to .. string.sub(m[1], #from + 1)
  redis.call('HSET', KEYS[2], target, m[2])
  out[#out + 1] = m[1]
  out[#out + 1] = target
end
out[#out + 1] = ''
local left = redis.call('HVALS', KEYS[2])
for _, r in ipairs(replaced) do
  out[#out + 1] = r[1]
  out[#out + 1] = park(KEYS[3], r[2], left)
end
out[1] = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[1], ARGV[2])
return out
