-- release.lua: give a running task back without an outcome (its worker is shutting down):
-- under the current lease only, the task stays working, the attempt does not count, and the
-- job is replaced by a fresh one that any worker reads at once. One atomic step.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream
-- ARGV[1]  fencing token         ARGV[2]  job entry id
-- returns  'done' | 'terminal' | 'lost' | 'gone'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function ack()
  redis.call('XACK', KEYS[2], 'workers', ARGV[2])
  redis.call('XDEL', KEYS[2], ARGV[2])
end

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl', 'id', 'attempts')
if not f[1] then
  ack()
  return 'gone'
end
local ttl = tonumber(f[4])
if ttl >= 0 and now >= tonumber(f[3]) + ttl then
  redis.call('DEL', KEYS[1])
  ack()
  return 'gone'
end
if f[2] ~= ARGV[1] then
  -- A newer lease holder owns the job now.
  return 'lost'
end
if f[1] ~= 'working' then
  ack()
  return 'terminal'
end
local attempts = tonumber(f[6]) - 1
if attempts < 0 then
  attempts = 0
end
redis.call('HSET', KEYS[1], 'lease_until', 0, 'attempts', attempts)
ack()
redis.call('XADD', KEYS[2], '*', 'task', f[5])
return 'done'
