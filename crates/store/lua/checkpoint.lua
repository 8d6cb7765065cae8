-- checkpoint.lua: record a running task's continuation state under the current lease, so a
-- run that dies can be resumed from it by another worker rather than started again (the task
-- is then marked resumable). One atomic step.
--
-- KEYS[1]  task record (hash)
-- ARGV[1]  fencing token         ARGV[2]  state JSON
-- returns  'held' | 'cancelled' | 'gone' | 'lost'
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl')
if not f[1] then
  return 'gone'
end
if drop_if_expired(KEYS[1], f[3], f[4], now) then
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
