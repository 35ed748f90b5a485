-- Writes byte runs into one storage block, for any number of leaves, at once.
-- KEYS: the part keys involved (all in the block's slot {id.b}).
-- ARGV: triples (key number 1..#KEYS, offset in the key, the run's bytes).
-- Each run travels as its own argument, so tdstored copies the bytes once,
-- into the command, and the script needs no string.sub.
-- Every run is checked before anything is written: each key must exist and
-- be long enough. SETRANGE alone would silently create the key of a
-- generation that was replaced meanwhile; instead the script reports
-- TDSTALE <key> and writes nothing, and the caller refreshes its schema and
-- retries. Only the selected bytes are written: no read-modify-write.
for i = 1, #ARGV, 3 do
  local key = KEYS[tonumber(ARGV[i])]
  if redis.call('STRLEN', key) < tonumber(ARGV[i + 1]) + #ARGV[i + 2] then
    return redis.error_reply('TDSTALE ' .. key)
  end
end
for i = 1, #ARGV, 3 do
  redis.call('SETRANGE', KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1]), ARGV[i + 2])
end
return 1
