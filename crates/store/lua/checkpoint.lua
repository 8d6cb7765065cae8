-- checkpoint.lua: record a running task's continuation state under the current lease, so a
-- run that dies can be resumed from it by another worker rather than started again (the task
-- is then marked resumable). One atomic step.
--
-- KEYS[1]  task record (hash)
-- ARGV[1]  fencing token         ARGV[2]  state JSON
-- returns  'held' | 'cancelled' | 'gone' | 'lost'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl')
if not f[1] then
  return 'gone'
end
local ttl = tonumber(f[4])
if ttl >= 0 and now >= tonumber(f[3]) + ttl then
  redis.call('DEL', KEYS[1])
  return 'gone'
end
if f[1] == 'cancelled' then
  return 'cancelled'
end
if f[2] ~= ARGV[1] or f[1] ~= 'working' then
  return 'lost'
end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'resumable', '1')
return 'held'
