-- Lets one sweeper claim an expired pending write before deleting its blocks.
-- KEYS[1] pending hash. ARGV[1] generation, ARGV[2] the record the sweeper
-- read. Removes the entry and returns 1 only if it is unchanged (the writer
-- neither committed nor refreshed it since); else returns 0.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
