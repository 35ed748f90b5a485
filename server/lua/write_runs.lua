-- Writes byte runs into one storage block, for any number of leaves, at once.
-- KEYS: the part keys involved (all in the block's slot {id.b}).
-- ARGV[1]: G, the number of strided groups; then G groups of five
--   (key number 1..#KEYS, first offset, stride, run length, bytes): runs of
--   one length at a fixed stride (stride >= length), their bytes back to
--   back in one argument; run j (from 0) goes to offset + j * stride;
-- then triples (key number, offset, the run's bytes): single runs.
-- Groups are written first, then single runs, each in argument order. The
-- caller groups runs only when no two of them overlap; where an index
-- selects a cell twice, every run is a single, in index order, so that the
-- last occurrence wins.
--
-- Why groups: a step slice's block (td[::3] of [10000, 64] f32: 3,334 runs
-- per leaf) used to travel as three arguments per run: Redis parsed ~10,000
-- argument strings per leaf, made each a Lua string of ARGV and converted
-- two of them with tonumber before the first write. As one argument per
-- leaf, tdstored sends each leaf's rows in place (tdstore-bench a.write[::3]:
-- 96 -> 56-71 ms, Redis CPU 39 -> 35 ms, tdstored's 18 -> 10 ms). Each run
-- is still its own SETRANGE of a string.sub: writing one covering range
-- instead would rewrite the bytes between the runs, which the request did
-- not select and another writer may be writing. Never read-modify-write.
-- A malformed group (bytes not whole runs, a stride shorter than a run) is
-- a caller's bug: refused before anything is written.
--
-- Every run is checked before anything is written: each key must exist and
-- be long enough. SETRANGE alone would silently create the key of a
-- generation that was replaced meanwhile; instead the script reports
-- TDSTALE <key> and writes nothing, and the caller refreshes its schema and
-- retries. One STRLEN per key, against the furthest byte its runs reach:
-- each redis.call saved counts.
local call, sub = redis.call, string.sub
local groups = tonumber(ARGV[1])
local singles = 2 + 5 * groups  -- the first single run's argument
local reach = {}
for i = 2, singles - 1, 5 do
  local length, n = tonumber(ARGV[i + 3]), #ARGV[i + 4]
  local count = n / length
  if length < 1 or count < 1 or count ~= math.floor(count) or tonumber(ARGV[i + 2]) < length then
    return redis.error_reply('ERR write_runs: a malformed group at argument ' .. i)
  end
  local k, e = tonumber(ARGV[i]), tonumber(ARGV[i + 1]) + (count - 1) * tonumber(ARGV[i + 2]) + length
  if reach[k] == nil or e > reach[k] then reach[k] = e end
end
for i = singles, #ARGV, 3 do
  local k, e = tonumber(ARGV[i]), tonumber(ARGV[i + 1]) + #ARGV[i + 2]
  if reach[k] == nil or e > reach[k] then reach[k] = e end
end
for k, e in pairs(reach) do
  if call('STRLEN', KEYS[k]) < e then
    return redis.error_reply('TDSTALE ' .. KEYS[k])
  end
end
for i = 2, singles - 1, 5 do
  local key, offset, stride = KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local length, bytes = tonumber(ARGV[i + 3]), ARGV[i + 4]
  for from = 1, #bytes, length do
    call('SETRANGE', key, offset, sub(bytes, from, from + length - 1))
    offset = offset + stride
  end
end
for i = singles, #ARGV, 3 do
  call('SETRANGE', KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1]), ARGV[i + 2])
end
return 1
