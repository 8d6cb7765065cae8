-- vault_put.lua: writes a vault entry if it is as the writer expects (compare-and-set on its
-- version), and indexes it, atomically: of two replicas refreshing one connection from the
-- same version, one wins.
--
-- KEYS[1]  the entry (hash: value, meta, version, updated, scope, name)
-- KEYS[2]  its kind's index (zset of "<scope>\0<name>", score 0)
-- KEYS[3]  the vault's version sequence (integer): versions never repeat, not even for an
--          entry deleted and written anew, so a compare-and-set on a version read before a
--          delete never matches what was written after it
-- ARGV[1]  value (sealed by the caller)
-- ARGV[2]  meta (JSON, nothing secret)
-- ARGV[3]  expectation: "absent", "any", or the version expected
-- ARGV[4]  index member
-- ARGV[5]  scope
-- ARGV[6]  name
-- returns  {1, new version} when written; {0, version found or 0 when absent} otherwise
-- uses (from prelude.lua): now_ms

local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '')
local expect = ARGV[3]
local ok
if expect == 'absent' then
  ok = current == nil
elseif expect == 'any' then
  ok = true
else
  ok = current ~= nil and current == tonumber(expect)
end
if not ok then
  return {0, current or 0}
end
local now = now_ms()
local version = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'meta', ARGV[2], 'version', version,
  'updated', string.format('%.0f', now), 'scope', ARGV[5], 'name', ARGV[6])
redis.call('ZADD', KEYS[2], 0, ARGV[4])
return {1, version}
