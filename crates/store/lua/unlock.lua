-- unlock.lua: releases a named lock only for the holder that took it (after a lapse another
-- replica may hold it, and its lock is not ours to release).
--
-- KEYS[1]  the lock (string: its holder)
-- ARGV[1]  the holder releasing it
-- returns  1 if released, 0 otherwise

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
