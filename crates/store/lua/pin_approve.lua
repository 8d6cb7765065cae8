-- pin_approve.lua: approves a withheld tool's latest seen definition if its hash is the one
-- the operator saw (compare-and-set: a definition seen since is not approved blindly).
-- Repeating it changes nothing (the hash is then approved already).
--
-- KEYS[1]  approved       (hash: tool -> approved hash)
-- KEYS[2]  approved-defs  (hash: tool -> approved definition JSON)
-- KEYS[3]  seen           (hash: tool -> latest seen hash, withheld tools only)
-- KEYS[4]  seen-defs      (hash: tool -> latest seen definition JSON)
-- KEYS[5]  seeded         (string: set once anything was approved)
-- ARGV[1]  tool
-- ARGV[2]  the hash the operator saw
-- ARGV[3]  most tools approved
-- returns  {1, ""} approved (now or before); {0, latest seen hash or ""} stale; {2, ""} full
--
-- An empty hash (a definition kept only as a stub, over the observer's bound) is never approved.

local seen = redis.call('HGET', KEYS[3], ARGV[1])
if ARGV[2] == '' then
  return {0, seen or ''}
end
if seen ~= ARGV[2] then
  if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] and not seen then
    return {1, ''}
  end
  return {0, seen or ''}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return {2, ''}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], redis.call('HGET', KEYS[4], ARGV[1]) or '{}')
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('SET', KEYS[5], '1')
return {1, ''}
