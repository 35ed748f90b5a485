-- The whole of a small whole-leaf write in one round trip, on a standalone
-- Redis (WriteTxn's at-once path, server/redis_store/leaf_writer.h). Sent
-- inside MULTI ... EXEC right behind the commands that wrote the new
-- generations' parts; it commits them as commit_leaves.lua would, or
-- deletes them.
--
-- Why no pending entries and no begin_write: MULTI ... EXEC runs as one
-- step, so no one sees the parts before this script has decided, and a
-- daemon that dies before its EXEC leaves nothing (Redis drops the queued
-- transaction of a connection that closed). claim_generations.lua, first
-- in the same EXEC, claimed the generations, or held the parts so that no
-- SET wrote.
--
-- KEYS[1] meta, KEYS[2] leaves, KEYS[3] pending, KEYS[4] the catalog,
-- KEYS[5] the namespace's stored-bytes counter (reserve_bytes.lua),
-- KEYS[6] the hold (KeySchema::AtOnceHold), then every part written. ARGV[1] the name the catalog must still give the
-- id ARGV[2] (as the probe checks a schema from tdstored's cache,
-- schema_cache.h), or '' (a schema just loaded, or a dict not yet
-- published), ARGV[3] the schema version the write was checked against,
-- ARGV[4] the bytes the new generations take, ARGV[5] the namespace quota
-- (0: none), ARGV[6] n, ARGV[7] mode, then n triples (encoded path, leaf
-- record, generation), then the schema-change channel and the id to
-- publish, then the length of each part (in KEYS' order).
--
-- Returns what commit_leaves.lua returns. If the claim failed, removes
-- what it held and refuses: TDNODICT (no dict) or TDGEN <counter> (the
-- generations were not free: propose past the counter). On any other
-- refusal every part is deleted and nothing else changes: TDNODICT (the
-- dict or its name is gone), TDSTALE (its version moved: the caller checks the write again on
-- a fresh schema), TDQUOTA <bytes stored> (the namespace quota), TDSHORT
-- <key> (a part is not the length sent: its write did not run), TDLOCKED
-- <path> (mode 'strict' on a locked dict).
--@include park.lua
--@include commit.lua
local parts = #KEYS - 6
local held = redis.call('GET', KEYS[6])
if held then
  local counter = nil
  for line in string.gmatch(held, '[^\n]+') do
    if counter == nil then
      counter = line
    else
      local key = string.sub(line, 2)
      redis.call('DEL', key)
      if string.sub(line, 1, 1) == 'R' then redis.call('RENAME', key .. ':at_once_held', key) end
    end
  end
  redis.call('DEL', KEYS[6])
  if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('TDNODICT the dict was deleted') end
  return redis.error_reply('TDGEN ' .. counter)
end
local function refuse(reason)
  for i = 7, #KEYS do redis.call('DEL', KEYS[i]) end
  return redis.error_reply(reason)
end
if (ARGV[1] ~= '' and redis.call('HGET', KEYS[4], ARGV[1]) ~= ARGV[2])
    or redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return refuse('TDNODICT the dict was deleted')
end
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[3] then
  return refuse('TDSTALE the schema changed')
end
local n = tonumber(ARGV[6])
local lengths = 8 + 3 * n + 2
-- Claimed (claim_generations.lua moved the counter to the last of them),
-- or that script did not run to its end: then nothing here is known to be
-- this write's, and nothing is deleted.
local last = 0
for i = 0, n - 1 do last = math.max(last, tonumber(ARGV[8 + 3 * i + 2])) end
if tonumber(redis.call('HGET', KEYS[1], 'next_gen') or '-1') < last then
  return redis.error_reply('TDGEN unclaimed')
end
for i = 0, parts - 1 do
  if redis.call('STRLEN', KEYS[7 + i]) ~= tonumber(ARGV[lengths + i]) then
    return refuse('TDSHORT ' .. KEYS[7 + i])
  end
end
-- Every schema change bumps the version, so the one checked above is the
-- schema the caller checked the write against (locks, batch, nesting:
-- commit_refusal's reasons). Only 'strict' adds a rule that the caller
-- may have set after it began a leaf (WriteTxn::RefuseIfLocked).
if ARGV[7] == 'strict' and redis.call('HEXISTS', KEYS[1], 'locked') == 1 then
  return refuse('TDLOCKED ' .. ARGV[8])
end
local used = tonumber(redis.call('GET', KEYS[5]) or '0')
local delta, quota = tonumber(ARGV[4]), tonumber(ARGV[5])
if delta > 0 and quota > 0 and used + delta > quota then
  return refuse('TDQUOTA ' .. string.format('%d', used))
end
if delta > 0 then redis.call('INCRBY', KEYS[5], ARGV[4]) end
return commit_flip(KEYS[1], KEYS[2], KEYS[3], n, ARGV[7], 8, ARGV[8 + 3 * n], ARGV[9 + 3 * n])
