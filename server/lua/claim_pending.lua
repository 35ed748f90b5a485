-- Compare-and-set on one pending-write entry, for the sweeper.
-- KEYS[1] pending hash. ARGV[1] generation, ARGV[2] the value the caller
-- read, ARGV[3] the new value, or '' to remove the entry.
-- Returns 1 if the entry still held ARGV[2] (and was changed), else 0 (the
-- writer committed, refreshed or aborted it meanwhile).
-- The sweeper first swaps an expired entry for a short lease, deletes the
-- blocks, then removes the entry only if it still holds its lease: if the
-- sweeper dies in between, the entry expires again and another pass redoes
-- the deletion.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
