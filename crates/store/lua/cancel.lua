-- cancel.lua: cancel an owner's task unless it is terminal (idempotent).
--
-- KEYS[1]  task record (hash)
-- ARGV[1]  owner key        ARGV[2]  event channel of the task
-- returns  {'notfound'}                       unknown, expired, or another owner's
--          {'terminal', field, value, ...}    already terminal: the record, unchanged
--          {'ok', field, value, ...}          now cancelled: the record
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'owner', 'status', 'created', 'ttl')
if not f[1] or f[1] ~= ARGV[1] then
  return {'notfound'}
end
if drop_if_expired(KEYS[1], f[3], f[4], now) then
  return {'notfound'}
end
local status = f[2]
if status == 'completed' or status == 'failed' or status == 'cancelled' then
  local record = redis.call('HGETALL', KEYS[1])
  table.insert(record, 1, 'terminal')
  return record
end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'msg', 'Cancelled by the client', 'updated', now, 'lease_until', 0)
redis.call('PUBLISH', ARGV[2], 'cancelled')
local record = redis.call('HGETALL', KEYS[1])
table.insert(record, 1, 'ok')
return record
