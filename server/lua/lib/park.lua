-- Parking retired generations in the pending hash, shared by the scripts
-- that replace or remove leaves (commit_leaves, delete_leaves,
-- rename_leaves). Not a script of its own: server/embed_lua.cmake pastes
-- this file over a script's include line for it, so each script keeps
-- these as local functions. It touches only the pending key it
-- is given, which each script passes as one of its KEYS, so a script still
-- touches the keys of one slot only.
--
-- park_expired(pending, gen, rec): parks generation gen, whose leaf record
-- is rec, as already expired ("expires_ms=0;<record>", server/redis_store/leaf_record_text.h's
-- pending record): the caller deletes its blocks right away and then the
-- entry, and if the caller dies first the sweeper does it.
local function park_expired(pending, gen, rec)
  redis.call('HSET', pending, gen, 'expires_ms=0;' .. rec)
end
-- park(pending, rec, left): parks the generation of a removed leaf whose
-- record is rec, and returns rec. A record dict's leaves share one
-- generation (';rec=' in their records): while a record of `left` (the
-- records still in the dict) names it, nothing is parked and it returns
-- 'shared' (no blocks to delete).
local function park(pending, rec, left)
  local gen = string.match(rec, 'gen=(%d+)')
  if string.find(rec, ';rec=', 1, true) then
    for _, l in ipairs(left) do
      if string.match(l, 'gen=(%d+)') == gen then return 'shared' end
    end
  end
  park_expired(pending, gen, rec)
  return rec
end
