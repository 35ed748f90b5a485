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
--@include commit.lua
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return redis.error_reply('TDNODICT the dict was deleted')
end
local n = tonumber(ARGV[1])
local refused = commit_refusal(KEYS[1], KEYS[2], n, ARGV[2], 3)
if refused then return redis.error_reply(refused) end
for i = 0, n - 1 do
  local gen = ARGV[3 + 3 * i + 2]
  if redis.call('HEXISTS', KEYS[3], gen) == 0 then
    return redis.error_reply('TDSWEPT ' .. gen)
  end
end
return commit_flip(KEYS[1], KEYS[2], KEYS[3], n, ARGV[2], 3, ARGV[3 + 3 * n], ARGV[4 + 3 * n])
