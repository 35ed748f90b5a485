-- Claims the generations a write sent at once names, inside its MULTI ...
-- EXEC, before the SET ... NX of each part (WriteTxn's at-once path,
-- server/redis_store/leaf_writer_at_once.cc); write_at_once.lua follows.
-- KEYS[1] meta, KEYS[2] the hold (KeySchema::AtOnceHold), then every part.
-- ARGV[1] the first generation, ARGV[2] the last.
--
-- Why claimed here rather than taken ahead: the generations are proposed
-- by tdstored before the transaction runs (the part keys name them), and a
-- range taken ahead would outlive what Redis remembers: a Redis that
-- restarts empty gives the same dict ids again, one that loses its last
-- writes gives the same generations again. Claimed in the same EXEC as the
-- parts, against the counter as it is, they are free by the rule every
-- writer keeps: a generation's keys are written only after the counter
-- passed it (begin_write.lua: HINCRBY; here: HSET to the last).
--
-- Free (the dict exists, the first generation is past the counter, and no
-- part key exists): the counter moves to the last; returns 0, and the
-- parts' commands write. Otherwise no part may be written: each part key
-- becomes a hash, on which SET ... NX writes nothing (the key exists) and
-- SETRANGE fails (WRONGTYPE), a key that existed being moved aside to
-- <key>:at_once_held first (guard_runs.lua does the same). The hold
-- (KEYS[2]) names the counter, then each key, 'R' (moved aside) or 'D'
-- (made here), for write_at_once.lua, which puts every key back; returns 1.
local counter = tonumber(redis.call('HGET', KEYS[1], 'next_gen') or '-1')
local free = redis.call('EXISTS', KEYS[1]) == 1 and tonumber(ARGV[1]) > counter
for i = 3, #KEYS do
  if not free then break end
  if redis.call('EXISTS', KEYS[i]) == 1 then free = false end
end
if free then
  redis.call('HSET', KEYS[1], 'next_gen', ARGV[2])
  return 0
end
local held = {string.format('%d', counter)}
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('RENAME', KEYS[i], KEYS[i] .. ':at_once_held')
    held[#held + 1] = 'R' .. KEYS[i]
  else
    held[#held + 1] = 'D' .. KEYS[i]
  end
  redis.call('HSET', KEYS[i], 'tdstore', 'held')
end
redis.call('SET', KEYS[2], table.concat(held, '\n'))
return 1
