-- vault_delete.lua: deletes a vault entry and its index member, atomically.
--
-- KEYS[1]  the entry
-- KEYS[2]  its kind's index
-- ARGV[1]  index member
-- returns  1 if there was an entry, 0 otherwise

redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
