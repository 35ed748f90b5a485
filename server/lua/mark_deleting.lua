-- Marks a dict's meta as being deleted, so begin_write.lua and
-- commit_leaves.lua refuse it, while keeping the block layout readable for
-- the deletion itself (which may be interrupted and redone).
-- KEYS[1] meta. Returns 1 if the meta exists, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'deleting', '1')
return 1
