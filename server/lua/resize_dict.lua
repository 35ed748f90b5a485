-- Changes batch dim 0 of a dict, in steps (server/redis_store/dict_resize.h).
-- KEYS[1] meta, KEYS[2] leaves (same slot: {dict_id}).
-- ARGV[1] 'prepare', 'commit' or 'release'; ARGV[2] the dict's name;
-- ARGV[3] the schema version the caller planned against; ARGV[4] batch
-- dim 0 then; ARGV[5] the new batch dim 0; ARGV[6] the schema-change
-- channel; ARGV[7] the dict's id (published on it); ARGV[8] the caller's
-- lease token; ARGV[9] now and ARGV[10] the lease's expiry, in unix ms.
--
-- A resize holds a lease, the meta's `resizing` field ('<token>;<expiry>'),
-- from 'prepare' to 'release': two resizes sizing one dict's blocks at once
-- would undo each other's work. A live lease of another caller is TDBUSY;
-- an expired one (its daemon died) is taken over. 'release' drops the lease
-- if it is still the caller's, and checks nothing else.
--
-- 'prepare' and 'commit' first check that the dict is still the one
-- planned against: it exists under that name and is not being deleted
-- (TDNODICT), is not locked (TDLOCKED: a resize changes every leaf's
-- shape), and still has that version and dim 0 (TDSTALE: the caller undoes
-- what it prepared and plans again).
--
-- 'prepare' runs before tdstored sizes any block. It takes the lease and
-- raises the meta's `rows_high`, the most rows dim 0 ever had or is being
-- given: deleting a generation deletes its blocks up to rows_high, so no
-- block a grow made is left behind, even if the grow failed or its daemon
-- died. Returns the version, unchanged.
--
-- 'commit' needs the lease still held (TDLEASE otherwise: another resize
-- took it over and owns the parts now). It makes the new size visible to everyone at once:
-- every leaf record's dim 0 and the meta's batch_shape change together,
-- the version is bumped and the change published. Returns the new version.
local mode, token = ARGV[1], ARGV[8]
local lease = redis.call('HGET', KEYS[1], 'resizing')
local holder, expiry = nil, 0
if lease then
  holder, expiry = string.match(lease, '^(.*);(%d+)$')
  expiry = tonumber(expiry or '0')
end
if mode == 'release' then
  if holder == token then redis.call('HDEL', KEYS[1], 'resizing') end
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 or
    redis.call('HGET', KEYS[1], 'name') ~= ARGV[2] then
  return redis.error_reply('TDNODICT the dict was deleted')
end
if redis.call('HEXISTS', KEYS[1], 'locked') == 1 then
  return redis.error_reply('TDLOCKED the dict is locked')
end
if lease and holder ~= token and expiry > tonumber(ARGV[9]) then
  return redis.error_reply('TDBUSY another resize of the dict is under way')
end
if mode == 'commit' and holder ~= token then
  return redis.error_reply('TDLEASE the resize lease expired and was taken over')
end
local batch = redis.call('HGET', KEYS[1], 'batch_shape')
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[3] or string.match(batch, '^%d+') ~= ARGV[4] then
  return redis.error_reply('TDSTALE the dict changed meanwhile')
end
if mode == 'prepare' then
  redis.call('HSET', KEYS[1], 'resizing', token .. ';' .. ARGV[10])
  local high = tonumber(redis.call('HGET', KEYS[1], 'rows_high') or '0')
  local most = math.max(tonumber(ARGV[4]), tonumber(ARGV[5]))
  if most > high then redis.call('HSET', KEYS[1], 'rows_high', string.format('%d', most)) end
  return tonumber(ARGV[3])
end
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  -- Records are 'key=value' pairs joined by ';' (server/redis_store/leaf_record_text.h); the
  -- leading ';' anchors the match to the 'shape' key itself.
  local rec = string.gsub(';' .. all[i + 1], ';shape=%d+', ';shape=' .. ARGV[5], 1)
  redis.call('HSET', KEYS[2], all[i], string.sub(rec, 2))
end
redis.call('HSET', KEYS[1], 'batch_shape', (string.gsub(batch, '^%d+', ARGV[5], 1)))
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[6], ARGV[7])
return version
