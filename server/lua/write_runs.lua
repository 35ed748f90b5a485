-- Writes byte runs into one storage block, for any number of leaves, at once.
-- KEYS: the part keys involved (all in the block's slot {id.b}).
-- ARGV: triples (key number 1..#KEYS, offset in the key, the run's bytes).
-- Each run travels as its own argument, so tdstored copies the bytes once,
-- into the command, and the script needs no string.sub.
-- Every run is checked before anything is written: each key must exist and
-- be long enough. SETRANGE alone would silently create the key of a
-- generation that was replaced meanwhile; instead the script reports
-- TDSTALE <key> and writes nothing, and the caller refreshes its schema and
-- retries. Only the selected bytes are written: no read-modify-write (a
-- GETRANGE + string patching + one SETRANGE of a step slice's span was
-- measured 3x slower than a SETRANGE per run).
--
-- One STRLEN per key, against the furthest byte its runs reach: a step
-- slice's block holds thousands of runs, and each redis.call saved counts
-- (write td[::3], 5 leaves of [10000, 64] f32: 129 -> 90 ms).
local reach = {}
for i = 1, #ARGV, 3 do
  local k = tonumber(ARGV[i])
  local e = tonumber(ARGV[i + 1]) + #ARGV[i + 2]
  if reach[k] == nil or e > reach[k] then reach[k] = e end
end
for k, e in pairs(reach) do
  if redis.call('STRLEN', KEYS[k]) < e then
    return redis.error_reply('TDSTALE ' .. KEYS[k])
  end
end
for i = 1, #ARGV, 3 do
  redis.call('SETRANGE', KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1]), ARGV[i + 2])
end
return 1
