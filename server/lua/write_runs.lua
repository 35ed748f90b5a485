-- Writes byte runs into one storage block, for any number of leaves, at once.
-- KEYS: the part keys involved (all in the block's slot {id.b}).
-- ARGV[1]: the runs' bytes concatenated; then quadruples (key number
-- 1..#KEYS, offset in the key, length, offset in ARGV[1]).
-- Every run is checked before anything is written: each key must exist and
-- be long enough. SETRANGE alone would silently create the key of a
-- generation that was replaced meanwhile; instead the script reports
-- TDSTALE <key> and writes nothing, and the caller refreshes its schema and
-- retries. Only the selected bytes are written: no read-modify-write.
local blob = ARGV[1]
for i = 2, #ARGV, 4 do
  local key = KEYS[tonumber(ARGV[i])]
  local last = tonumber(ARGV[i + 1]) + tonumber(ARGV[i + 2])
  if redis.call('STRLEN', key) < last then
    return redis.error_reply('TDSTALE ' .. key)
  end
end
for i = 2, #ARGV, 4 do
  local key = KEYS[tonumber(ARGV[i])]
  local offset = tonumber(ARGV[i + 1])
  local length = tonumber(ARGV[i + 2])
  local from = tonumber(ARGV[i + 3])
  redis.call('SETRANGE', key, offset, string.sub(blob, from + 1, from + length))
end
return 1
