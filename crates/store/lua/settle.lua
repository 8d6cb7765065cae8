-- settle.lua: end a run under the current lease: write a final status and outcome
-- (finish), or park the task as input_required with its outstanding requests (park); then
-- acknowledge the job. Never from a terminal status, never with a superseded lease.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream
-- ARGV[1]  fencing token         ARGV[2]  job entry id       ARGV[3]  event channel
-- ARGV[4]  new status: completed | failed | input_required
-- then, for completed/failed:  ARGV[5] 'result' | 'error'    ARGV[6] outcome JSON
-- or, for input_required:      ARGV[5] state JSON ('' = none)
--                              ARGV[6..] request key, request JSON, key, JSON, ...
--                              (each stored as field req:<key>; 'pending' counts them)
-- returns  'done' | 'terminal' | 'lost' | 'gone'

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function ack()
  redis.call('XACK', KEYS[2], 'workers', ARGV[2])
  redis.call('XDEL', KEYS[2], ARGV[2])
end

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl')
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
if f[1] == 'completed' or f[1] == 'failed' or f[1] == 'cancelled' then
  ack()
  return 'terminal'
end
if f[2] ~= ARGV[1] then
  return 'lost'
end

local status = ARGV[4]
if status == 'input_required' then
  local pending = 0
  for i = 6, #ARGV - 1, 2 do
    redis.call('HSET', KEYS[1], 'req:' .. ARGV[i], ARGV[i + 1])
    pending = pending + 1
  end
  redis.call('HSET', KEYS[1], 'status', status, 'pending', pending, 'updated', now, 'lease_until', 0)
  if ARGV[5] == '' then
    redis.call('HDEL', KEYS[1], 'state')
  else
    redis.call('HSET', KEYS[1], 'state', ARGV[5])
  end
else
  redis.call('HSET', KEYS[1], 'status', status, ARGV[5], ARGV[6], 'updated', now, 'lease_until', 0)
end
redis.call('PUBLISH', ARGV[3], status)
ack()
return 'done'
