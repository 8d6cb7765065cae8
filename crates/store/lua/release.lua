-- release.lua: give a running task back without an outcome: under the current lease only, the
-- task stays working, the attempt does not count, and the job is replaced by a fresh one that
-- any worker reads at once (a task held for input becomes parked instead: no job until it is
-- answered). One atomic step. Two uses:
--   * release (its worker is shutting down): ARGV[1..2] only;
--   * defer (its worker does not know the task's tool, e.g. a replica of an older release
--     during a rolling upgrade): the first deferral is remembered, and once the grace period
--     since then is over the task fails instead, so a tool no replica knows does not go round
--     for ever.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream         KEYS[3]  lease index (zset)
-- ARGV[1]  fencing token         ARGV[2]  job entry id ('' = run where created: its lease
--                                         entry is dropped instead of a job acknowledged)
-- defer only: ARGV[3] grace ms   ARGV[4] error JSON (when giving up)   ARGV[5] event channel
--             ARGV[6] status message (when giving up)
-- returns  'done' | 'gaveup' (defer only) | 'terminal' | 'lost' | 'gone'
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl', 'id', 'attempts', 'deferred_since')

local function ack()
  if ARGV[2] ~= '' then
    redis.call('XACK', KEYS[2], 'workers', ARGV[2])
    redis.call('XDEL', KEYS[2], ARGV[2])
  elseif f[5] then
    redis.call('ZREM', KEYS[3], f[5])
  end
end
if not f[1] then
  ack()
  return 'gone'
end
if drop_if_expired(KEYS[1], f[3], f[4], now) then
  ack()
  return 'gone'
end
if f[2] ~= ARGV[1] then
  -- A newer lease holder owns the job now.
  return 'lost'
end
-- The lease ends here and the attempt does not count.
local function let_go()
  local attempts = tonumber(f[6]) - 1
  if attempts < 0 then
    attempts = 0
  end
  redis.call('HSET', KEYS[1], 'lease_until', 0, 'attempts', attempts)
  ack()
end

if f[1] == 'input_required' and not ARGV[3] then
  -- Held (asking in place, see hold.lua): from now on it waits like a parked task; the answer
  -- that completes its requests enqueues a job (the lease is gone).
  let_go()
  return 'done'
end
if f[1] ~= 'working' then
  ack()
  return 'terminal'
end
if ARGV[3] then
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
end
let_go()
redis.call('XADD', KEYS[2], '*', 'task', f[5])
return 'done'
