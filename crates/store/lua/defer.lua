-- defer.lua: give a claimed task back because this worker cannot run it (it does not know the
-- task's tool, e.g. a replica of an older release during a rolling upgrade): like release.lua
-- (lease cleared, attempt uncounted, a fresh job that any worker may read), but the first
-- deferral is remembered, and once the grace period since then is over the task fails
-- instead, so a tool no replica knows does not circulate for ever. One atomic step.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream
-- ARGV[1]  fencing token         ARGV[2]  job entry id      ARGV[3]  grace ms
-- ARGV[4]  error JSON (when giving up)                      ARGV[5]  event channel
-- ARGV[6]  status message (when giving up)
-- returns  'done' | 'gaveup' | 'terminal' | 'lost' | 'gone'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function ack()
  redis.call('XACK', KEYS[2], 'workers', ARGV[2])
  redis.call('XDEL', KEYS[2], ARGV[2])
end

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl', 'id', 'attempts', 'deferred_since')
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
  return 'lost'
end
if f[1] ~= 'working' then
  ack()
  return 'terminal'
end
local since = tonumber(f[7])
if not since then
  since = now
  redis.call('HSET', KEYS[1], 'deferred_since', now)
end
if now - since >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[4], 'updated', now, 'lease_until', 0,
    'msg', ARGV[6])
  redis.call('PUBLISH', ARGV[5], 'failed')
  ack()
  return 'gaveup'
end
local attempts = tonumber(f[6]) - 1
if attempts < 0 then
  attempts = 0
end
redis.call('HSET', KEYS[1], 'lease_until', 0, 'attempts', attempts)
ack()
redis.call('XADD', KEYS[2], '*', 'task', f[5])
return 'done'
