-- Reads byte runs of one storage block, for any number of leaves, at once.
-- KEYS: the part keys involved (all in the block's slot {id.b}).
-- ARGV: triples (key number 1..#KEYS, offset, length), in result order.
-- Returns the runs' bytes concatenated. Because it is one script, a reader
-- sees every leaf's rows of this block as of one moment: never a row written
-- in one leaf and not yet in another.
-- Errors: TDSTALE <key> if a run comes back short (the generation was
-- replaced or deleted): the caller refreshes its schema and retries.
local out = {}
for i = 1, #ARGV, 3 do
  local key = KEYS[tonumber(ARGV[i])]
  local offset = tonumber(ARGV[i + 1])
  local length = tonumber(ARGV[i + 2])
  local bytes = redis.call('GETRANGE', key, offset, offset + length - 1)
  if #bytes ~= length then
    return redis.error_reply('TDSTALE ' .. key)
  end
  out[#out + 1] = bytes
end
return table.concat(out)
