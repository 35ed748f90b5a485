-- Adds to (or, with a negative delta, takes from) the namespace's
-- stored-bytes counter, refusing a positive delta that would pass the quota.
-- KEYS[1] the counter (<ns>:used_bytes, its own slot). ARGV[1] delta,
-- ARGV[2] quota in bytes (0: no quota).
-- Returns the new total, or TDQUOTA <total now> if the delta does not fit.
-- Atomic: two daemons reserving at once can never both pass the quota.
-- Never goes below 0 (a release racing a dict deletion may count twice);
-- at 0 the key is removed, so a namespace that stores nothing has none.
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local delta = tonumber(ARGV[1])
local quota = tonumber(ARGV[2])
if delta > 0 and quota > 0 and used + delta > quota then
  return redis.error_reply('TDQUOTA ' .. string.format('%d', used))
end
if used + delta <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
