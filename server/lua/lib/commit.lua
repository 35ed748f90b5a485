-- The commit of freshly written generations, shared by commit_leaves.lua
-- (a stepwise write's last step) and write_at_once.lua (a small write's
-- only one). Pasted into each by server/embed_lua.cmake, after park.lua.
-- Both take n triples (encoded path, leaf record, generation) from
-- ARGV[base] on, and a mode ('replace', 'strict', 'create' or 'record':
-- commit_leaves.lua says what each means).
--
-- commit_refusal(meta, leaves, n, mode, base): why these leaves cannot be
-- committed, as an error reply's text (TDLOCKED <path>, TDBATCH <path>,
-- TDCONFLICT <path>\n<path>), or nil. Reads only.
local function commit_refusal(meta, leaves, n, mode, base)
  if redis.call('HEXISTS', meta, 'locked') == 1 then
    if mode == 'strict' then return 'TDLOCKED ' .. ARGV[base] end
    -- A locked dict keeps its schema: only rewriting a leaf in place (same
    -- dtype, shape and kind, a new generation, and for a one-value leaf a
    -- new value) is allowed, as tensordict allows writes into a locked
    -- TensorDict's existing entries. A ragged leaf's value (its cells'
    -- dtype) is schema, not data: it must stay.
    local function without_gen(record)
      local r = string.gsub(record, ';?gen=%d+', '')
      if not string.find(r, ';kind=ragged', 1, true) then
        r = string.gsub(r, ';value=%x*', '')
      end
      return r
    end
    for i = 0, n - 1 do
      local p, rec = ARGV[base + 3 * i], ARGV[base + 3 * i + 1]
      local old = redis.call('HGET', leaves, p)
      if not old or without_gen(old) ~= without_gen(rec) then
        return 'TDLOCKED ' .. p
      end
    end
  end
  local batch = redis.call('HGET', meta, 'batch_shape')
  if batch ~= '' then
    for i = 0, n - 1 do
      local shape = string.match(';' .. ARGV[base + 3 * i + 1], ';shape=([%d,]*)') or ''
      if shape ~= batch and string.sub(shape, 1, #batch + 1) ~= batch .. ',' then
        return 'TDBATCH ' .. ARGV[base + 3 * i]
      end
    end
  end
  local existing = redis.call('HKEYS', leaves)
  for i = 0, n - 1 do
    local p = ARGV[base + 3 * i]
    for _, f in ipairs(existing) do
      if f ~= p and (string.sub(p, 1, #f + 1) == f .. '/' or string.sub(f, 1, #p + 1) == p .. '/') then
        return 'TDCONFLICT ' .. p .. '\n' .. f
      end
    end
  end
  return nil
end
-- commit_flip(meta, leaves, pending, n, mode, base, channel, id): makes the
-- leaves visible, parks each generation replaced (or, for a path someone
-- else created first in 'create' and 'record' modes, ours) as expired,
-- bumps the version and publishes the dict's id on the schema channel.
-- Returns {version, old_1, ..., old_n}: old_i is the replaced leaf record,
-- '' when the path was new, or 'kept'.
local function commit_flip(meta, leaves, pending, n, mode, base, channel, id)
  local create_only = mode == 'create' or mode == 'record'
  local record_taken = false
  if mode == 'record' then
    for _, r in ipairs(redis.call('HVALS', leaves)) do
      if string.find(r, ';rec=', 1, true) then record_taken = true end
    end
    for i = 0, n - 1 do
      if redis.call('HEXISTS', leaves, ARGV[base + 3 * i]) == 1 then record_taken = true end
    end
  end
  local out = {0}
  for i = 0, n - 1 do
    local p, rec, gen = ARGV[base + 3 * i], ARGV[base + 3 * i + 1], ARGV[base + 3 * i + 2]
    local old = redis.call('HGET', leaves, p)
    if record_taken or (create_only and old) then
      park_expired(pending, gen, rec)
      out[#out + 1] = 'kept'
    else
      redis.call('HSET', leaves, p, rec)
      redis.call('HDEL', pending, gen)
      if old then
        park_expired(pending, string.match(old, 'gen=(%d+)'), old)
      end
      out[#out + 1] = old or ''
    end
  end
  out[1] = redis.call('HINCRBY', meta, 'version', 1)
  redis.call('PUBLISH', channel, id)
  return out
end
