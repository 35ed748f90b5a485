-- Last step of creating a dict that was built before it got its name (a
-- create with leaves, a copy into a new dict): the name appears with every
-- leaf already in place, or the creation is given up.
-- KEYS[1] catalog. ARGV[1] name, ARGV[2] id, ARGV[3] 'publish' or 'abandon'.
-- The creation is recorded under '/creating/<id>' (dict_store.h), and the
-- step that removes the record decides the dict's fate, so a publish and an
-- abandon (the builder giving up, or the sweeper) racing each other cannot
-- both win: whichever removes the record first does its part.
-- If the record is gone, the other one won: returns -1 and changes nothing.
-- 'abandon' records '/deleting/<id>' (the caller or the sweeper then
-- deletes the dict) and returns 0.
-- 'publish' sets the name and returns 1; if the name was taken meanwhile,
-- it records the deletion instead, in this same step, and returns 0.
if redis.call('HDEL', KEYS[1], '/creating/' .. ARGV[2]) == 0 then
  return -1
end
if ARGV[3] == 'publish' and redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  return 1
end
redis.call('HSET', KEYS[1], '/deleting/' .. ARGV[2], ARGV[2])
return 0
