-- vault_delete.lua: deletes a vault entry and its index member, atomically; when a version is
-- given, only while the entry is at that version (a delete decided on an old read never
-- removes what was written since).
--
-- KEYS[1]  the entry
-- KEYS[2]  its kind's index
-- ARGV[1]  index member
-- ARGV[2]  (optional) the version the entry must be at
-- returns  1 if an entry was deleted, 0 otherwise

if ARGV[2] ~= nil and ARGV[2] ~= '' then
  local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '')
  if current == nil or current ~= tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
