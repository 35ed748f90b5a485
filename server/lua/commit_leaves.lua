-- Makes freshly written generations visible: the commit of a write.
-- KEYS[1] meta, KEYS[2] leaves, KEYS[3] pending (same slot: {dict_id}).
-- ARGV[1] n, ARGV[2] mode, then n triples: encoded path, leaf record,
-- generation, then the schema-change channel and the dict's id, which is
-- published on it. Mode 'replace': all leaves flip together or none does;
-- 'strict': the same, but a locked dict refuses it whatever it writes.
-- Mode 'create': only paths that are still absent get their new leaf (the
-- zero-filled leaves an indexed write creates); a path someone else created
-- meanwhile keeps theirs, and ours is parked for deletion like a replaced
-- one (its slot in the reply is 'kept'). Mode 'record': the leaves of a
-- record dict's record, all of one generation (';rec=' in their records),
-- made only if the dict has no record yet and none of the paths; else
-- every one is 'kept' (the record someone else formed first stays).
-- A leaf of a record is never replaced here: WriteTxn::BeginLeaf refuses
-- every whole-leaf write onto a leaf of a record (parking its generation
-- would retire the rows of every other leaf of the record). Returns {version, old_1, ..., old_n}
-- where old_i is the replaced leaf record, '' when the path was new, or
-- 'kept'. Each replaced generation is parked in the pending hash as already expired
-- ("expires_ms=0;<record>", lib/park.lua): the caller deletes its blocks right away and
-- then the entry, and if the caller dies first the sweeper does it.
-- Errors: TDNODICT (dict deleted or being deleted), TDSWEPT (a generation's
-- pending entry is gone: the write took longer than the pending timeout and was swept),
-- TDCONFLICT (a new path lies under an existing leaf or above one),
-- TDLOCKED <path> (the dict is locked, set_locked.lua, and the write would
-- add a leaf or replace one by a leaf of another dtype or shape),
-- TDBATCH <path> (a leaf's shape does not start with the dict's batch
-- shape: the dict was resized, resize_dict.lua, after the write was planned).
--@include park.lua
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return redis.error_reply('TDNODICT the dict was deleted')
end
local n = tonumber(ARGV[1])
local create_only = ARGV[2] == 'create' or ARGV[2] == 'record'
if redis.call('HEXISTS', KEYS[1], 'locked') == 1 and ARGV[2] == 'strict' then
  return redis.error_reply('TDLOCKED ' .. ARGV[3])
end
if redis.call('HEXISTS', KEYS[1], 'locked') == 1 then
  -- A locked dict keeps its schema: only rewriting a leaf in place (same
  -- dtype, shape and kind, a new generation, and for a one-value leaf a new
  -- value) is allowed, as tensordict allows writes into a locked
  -- TensorDict's existing entries. A ragged leaf's value (its cells' dtype)
  -- is schema, not data: it must stay.
  local function without_gen(record)
    local r = string.gsub(record, ';?gen=%d+', '')
    if not string.find(r, ';kind=ragged', 1, true) then
      r = string.gsub(r, ';value=%x*', '')
    end
    return r
  end
  for i = 0, n - 1 do
    local p, rec = ARGV[3 + 3 * i], ARGV[3 + 3 * i + 1]
    local old = redis.call('HGET', KEYS[2], p)
    if not old or without_gen(old) ~= without_gen(rec) then
      return redis.error_reply('TDLOCKED ' .. p)
    end
  end
end
for i = 0, n - 1 do
  local gen = ARGV[3 + 3 * i + 2]
  if redis.call('HEXISTS', KEYS[3], gen) == 0 then
    return redis.error_reply('TDSWEPT ' .. gen)
  end
end
local batch = redis.call('HGET', KEYS[1], 'batch_shape')
if batch ~= '' then
  for i = 0, n - 1 do
    local shape = string.match(';' .. ARGV[3 + 3 * i + 1], ';shape=([%d,]*)') or ''
    if shape ~= batch and string.sub(shape, 1, #batch + 1) ~= batch .. ',' then
      return redis.error_reply('TDBATCH ' .. ARGV[3 + 3 * i])
    end
  end
end
local existing = redis.call('HKEYS', KEYS[2])
for i = 0, n - 1 do
  local p = ARGV[3 + 3 * i]
  for _, f in ipairs(existing) do
    if f ~= p and (string.sub(p, 1, #f + 1) == f .. '/' or string.sub(f, 1, #p + 1) == p .. '/') then
      return redis.error_reply('TDCONFLICT ' .. p .. '\n' .. f)
    end
  end
end
local record_taken = false
if ARGV[2] == 'record' then
  for _, r in ipairs(redis.call('HVALS', KEYS[2])) do
    if string.find(r, ';rec=', 1, true) then record_taken = true end
  end
  for i = 0, n - 1 do
    if redis.call('HEXISTS', KEYS[2], ARGV[3 + 3 * i]) == 1 then record_taken = true end
  end
end
local out = {0}
for i = 0, n - 1 do
  local p, rec, gen = ARGV[3 + 3 * i], ARGV[3 + 3 * i + 1], ARGV[3 + 3 * i + 2]
  local old = redis.call('HGET', KEYS[2], p)
  if record_taken or (create_only and old) then
    park_expired(KEYS[3], gen, rec)
    out[#out + 1] = 'kept'
  else
    redis.call('HSET', KEYS[2], p, rec)
    redis.call('HDEL', KEYS[3], gen)
    if old then
      park_expired(KEYS[3], string.match(old, 'gen=(%d+)'), old)
    end
    out[#out + 1] = old or ''
  end
end
out[1] = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('PUBLISH', ARGV[3 + 3 * n], ARGV[4 + 3 * n])
return out
