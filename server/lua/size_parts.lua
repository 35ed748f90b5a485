-- Gives block parts an exact length, for a resize (server/redis_store/dict_resize.h).
-- KEYS: part keys, all in one block's slot {id.b}.
-- ARGV: pairs (keep, length), one per key: the key's first `keep` bytes
-- are the leaf's and stay; it ends up `length` bytes long, any bytes past
-- `keep` being zeros. length 0 deletes the key.
--
-- A part is longer than `keep` when a shrink's trim or a failed grow left
-- bytes behind; those are cut first (a Lua copy of the kept prefix), so a
-- grown row reads zeros, never old data. Growing then sets the last byte:
-- Redis pads a string with zeros up to a SETRANGE's offset.
--
-- A part that should already hold `keep` > 0 bytes but does not exist
-- belongs to a generation replaced or deleted meanwhile: it is left alone
-- (recreating it would leak it), and the reply counts it. Returns that
-- count; the caller's commit then fails on the changed version anyway.
local missing = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local keep, length = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local have = redis.call('STRLEN', key)
  if length == 0 then
    redis.call('DEL', key)
  elseif keep > 0 and have == 0 then
    missing = missing + 1
  else
    if have > keep then
      if keep == 0 then
        redis.call('DEL', key)
      else
        redis.call('SET', key, redis.call('GETRANGE', key, 0, keep - 1))
      end
      have = keep
    end
    if length > have then
      redis.call('SETRANGE', key, length - 1, '\0')
    end
  end
end
return missing
