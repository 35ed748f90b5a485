-- Last step of creating a dict that was built before it got its name (a
-- create with leaves, a copy into a new dict): the name appears with every
-- leaf already in place.
-- KEYS[1] catalog. ARGV[1] name, ARGV[2] id.
-- The creation is recorded under '/creating/<id>' (dict_store.h). If the
-- record is gone, the sweeper took the creation as abandoned and is
-- deleting the dict: returns -1 and publishes nothing. If the name was
-- taken meanwhile, the creation becomes a deletion ('/deleting/<id>',
-- finished by the caller or the sweeper) in this same step, so the
-- half-made dict is never left unrecorded: returns 0. Returns 1 once
-- published.
if redis.call('HDEL', KEYS[1], '/creating/' .. ARGV[2]) == 0 then
  return -1
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  redis.call('HSET', KEYS[1], '/deleting/' .. ARGV[2], ARGV[2])
  return 0
end
return 1
