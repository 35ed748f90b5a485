-- Updates the informational name in a dict's meta after a rename, only if
-- the meta exists and is not being deleted: a plain HSET would recreate the
-- meta of a dict deleted meanwhile.
-- KEYS[1] meta. ARGV[1] the new name. Returns 1 if set, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'deleting') == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'name', ARGV[1])
return 1
