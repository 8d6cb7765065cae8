-- claim.lua: take the right to run a job's task (a lease with a new fencing token), or say
-- why not; past the attempt limit, fail the task and dead-letter the job. One atomic step.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream    KEYS[3]  dead-letter stream
-- ARGV[1]  job entry id          ARGV[2]  lease ms      ARGV[3]  max attempts
-- ARGV[4]  worker name           ARGV[5]  event channel of the task
-- ARGV[6]  claim id: the caller's own for this claim, the same on each of its retries
--          (empty: none). A retry whose earlier try landed (its reply lost, or its write
--          not yet confirmed by the replicas) finds its id and gets a fresh lease without
--          spending another attempt: nothing ran under the first one.
-- returns  {'run', token, field, value, ...}   run it; the record as claimed
--          {'gone'} | {'terminal'} | {'parked'}   nothing to do; job acknowledged
--          {'busy'}                            a live lease exists; job left pending
--          {'exhausted', tool}                 task failed; job dead-lettered
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local function ack()
  redis.call('XACK', KEYS[2], 'workers', ARGV[1])
  redis.call('XDEL', KEYS[2], ARGV[1])
end

local f = redis.call('HMGET', KEYS[1], 'status', 'lease_until', 'attempts', 'created', 'ttl', 'id', 'tool', 'claim')
if not f[1] then
  ack()
  return {'gone'}
end
if drop_if_expired(KEYS[1], f[4], f[5], now) then
  ack()
  return {'gone'}
end
local status = f[1]
if status == 'completed' or status == 'failed' or status == 'cancelled' then
  ack()
  return {'terminal'}
end
if status == 'input_required' then
  ack()
  return {'parked'}
end
local again = ARGV[6] ~= '' and f[8] == ARGV[6]
if tonumber(f[2]) > now and not again then
  return {'busy'}
end

local attempts = tonumber(f[3])
if not again then
  attempts = attempts + 1
end
if attempts > tonumber(ARGV[3]) then
  local tried = attempts - 1
  local err = cjson.encode({code = -32603,
    message = 'Task failed: its executor stopped before finishing, ' .. tried .. ' times'})
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', err, 'updated', now, 'lease_until', 0,
    'msg', 'Failed: no attempt finished (' .. tried .. ' tried)')
  redis.call('PUBLISH', ARGV[5], 'failed')
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', 10000, '*', 'task', f[6], 'entry', ARGV[1], 'attempts', tried)
  ack()
  return {'exhausted', f[7]}
end

local token = redis.call('HINCRBY', KEYS[1], 'token', 1)
redis.call('HSET', KEYS[1], 'attempts', attempts, 'lease_until', now + tonumber(ARGV[2]), 'worker', ARGV[4],
  'claim', ARGV[6])
local record = redis.call('HGETALL', KEYS[1])
table.insert(record, 1, token)
table.insert(record, 1, 'run')
return record
