-- lapse.lua: a task run where it was created whose lease deadline has passed (found by a
-- replica's sweep of its shard's lease index): if the lease really lapsed (Redis's clock
-- decides) and the task still wants a run, its entry leaves the lease index and a job is
-- enqueued, so any worker takes it over through the queue (attempts, fencing and the
-- dead-letter limit as for any job). One atomic step; of two sweeps that find the same entry,
-- only the first enqueues.
--
-- KEYS[1]  task record (hash)    KEYS[2]  lease index of the shard (zset)
-- KEYS[3]  job stream of the shard
-- ARGV[1]  task id
-- returns  'queued'   the task was enqueued
--          'live'     its lease was renewed meanwhile: the entry stays (at the new deadline)
--          'dropped'  nothing left to run (gone, expired, ended, parked, or already swept):
--                     the entry is removed
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return 'dropped'
end
local f = redis.call('HMGET', KEYS[1], 'status', 'lease_until', 'created', 'ttl')
if not f[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'dropped'
end
if drop_if_expired(KEYS[1], f[3], f[4], now) then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'dropped'
end
local deadline = tonumber(f[2]) or 0
if deadline > now then
  redis.call('ZADD', KEYS[2], deadline, ARGV[1])
  return 'live'
end
redis.call('ZREM', KEYS[2], ARGV[1])
if f[1] ~= 'working' then
  -- Ended, or waiting for input (an answer enqueues it).
  return 'dropped'
end
redis.call('XADD', KEYS[3], '*', 'task', ARGV[1])
return 'queued'
