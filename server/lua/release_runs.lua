-- Closes a block's write opened by guard_runs.lua (see there), last in the
-- same MULTI ... EXEC. KEYS: the same keys. ARGV[1]: the hold suffix.
-- A key guard_runs.lua held is a hash here: the hash goes, and the key
-- moved aside comes back. A block key is never a hash otherwise, so on
-- the usual path this is one TYPE per key and changes nothing.
local suffix = ARGV[1]
for _, key in ipairs(KEYS) do
  if redis.call('TYPE', key).ok == 'hash' then
    redis.call('DEL', key)
    if redis.call('EXISTS', key .. suffix) == 1 then redis.call('RENAME', key .. suffix, key) end
  end
end
return 0
