-- Opens a block's write when the runs' bytes travel as plain SETRANGEs
-- (indexed_io.cc: on standalone Redis), so that they never pass through Lua.
-- Why: every byte handed to a script is copied into a Lua string and hashed
-- byte by byte, about 1.1 ns a byte of Redis' one thread (a 138 KB write
-- spent 155 of its 166 us there; SETRANGE itself took 4 us).
--
-- Sent inside MULTI ... EXEC as: this script, the block's SETRANGEs, then
-- release_runs.lua with the same KEYS. Nothing else runs in between.
-- KEYS: the block's part keys. ARGV[i]: how far the runs into KEYS[i] reach
-- (the furthest byte + 1). ARGV[#KEYS + 1]: the suffix of a hold key.
--
-- If every key is a string at least that long, returns 0 and the SETRANGEs
-- write. Otherwise (a generation replaced or deleted meanwhile; a key cut
-- short or of another type) no SETRANGE may write, nor create a key that
-- is gone: each key is moved aside to <key><suffix> if it exists, and a
-- hash stands in its place, on which SETRANGE fails (WRONGTYPE) without
-- writing. release_runs.lua restores every key. Returns TDSTALE <key>.
-- The script never fails before it has decided: STRLEN goes through pcall.
local reach_of = ARGV
local suffix = ARGV[#KEYS + 1]
local stale = nil
for i, key in ipairs(KEYS) do
  local n = redis.pcall('STRLEN', key)
  if type(n) ~= 'number' or n < tonumber(reach_of[i]) then
    stale = key
    break
  end
end
if stale == nil then return 0 end
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then redis.call('RENAME', key, key .. suffix) end
  redis.call('HSET', key, 'tdstore', 'held')
end
return redis.error_reply('TDSTALE ' .. stale)
