-- Leases ARGV[1] fresh generations of a dict to one daemon, for writes
-- that name their generations before they run (write_at_once.lua).
-- KEYS[1] meta. Returns the last of them: they are last - ARGV[1] + 1 ..
-- last, and no other writer ever gets one of them (begin_write.lua takes
-- its generations from the same counter). Fails with TDNODICT if the dict
-- was deleted (or is being deleted): its meta is never recreated.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return redis.error_reply('TDNODICT the dict was deleted')
end
return redis.call('HINCRBY', KEYS[1], 'next_gen', ARGV[1])
