-- settle.lua: end a run under the current lease: write a final status and outcome
-- (finish), or park the task as input_required with its outstanding requests (park); then
-- acknowledge the job (or, for a task run where it was created, drop its lease from the lease
-- index). Never from a terminal status, never with a superseded lease.
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream         KEYS[3]  lease index (zset)
-- ARGV[1]  fencing token         ARGV[2]  job entry id ('' = run where created)
-- ARGV[3]  event channel
-- ARGV[4]  new status: completed | failed | input_required
-- then, for completed/failed:  ARGV[5] 'result' | 'error'    ARGV[6] outcome JSON
--                              ARGV[7] '1' when the result is a tool error (isError: true)
-- or, for input_required:      ARGV[5] state JSON ('' = none)
--                              ARGV[6] the request keys, a JSON array (read by tasks/get)
--                              ARGV[7..] request key, method asked, request JSON, ...
--                              (stored as req:<key> and reqm:<key>; 'pending' counts them)
-- returns  'done' | 'terminal' | 'lost' | 'gone'
-- Finishing blanks the status message the run last reported ('' reads as none); completing
-- sets a reported progress to 1 (1,000,000 ppm).
-- A run that parks ended cleanly: its attempt is given back, so a task may ask for input any
-- number of times without using up its attempts (and a resumed run is not taken for a rerun
-- of an interrupted one).
-- Repeating a settle that was applied (its reply lost) is safe: the lease it used is then
-- released (lease_until 0 under the same token), and the repeat answers 'done' (or
-- 'terminal') without writing.
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'created', 'ttl', 'lease_until', 'id', 'progress')

-- (A gone task's lease entry, which has no id to name here, is dropped by the lapse sweep.)
local function ack()
  if ARGV[2] ~= '' then
    redis.call('XACK', KEYS[2], 'workers', ARGV[2])
    redis.call('XDEL', KEYS[2], ARGV[2])
  elseif f[6] then
    redis.call('ZREM', KEYS[3], f[6])
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
if f[1] == 'completed' or f[1] == 'failed' or f[1] == 'cancelled' then
  ack()
  return 'terminal'
end
if f[2] ~= ARGV[1] then
  return 'lost'
end
if f[5] == '0' then
  -- This lease already settled (a repeat after a lost reply): nothing more to write.
  ack()
  return 'done'
end

local status = ARGV[4]
if status == 'input_required' then
  local pending = 0
  for i = 7, #ARGV - 2, 3 do
    redis.call('HSET', KEYS[1], 'req:' .. ARGV[i], ARGV[i + 2], 'reqm:' .. ARGV[i], ARGV[i + 1])
    pending = pending + 1
  end
  redis.call('HSET', KEYS[1], 'status', status, 'pending', pending, 'updated', now, 'lease_until', 0,
    'reqkeys', ARGV[6])
  if tonumber(redis.call('HGET', KEYS[1], 'attempts') or '0') > 0 then
    redis.call('HINCRBY', KEYS[1], 'attempts', -1)
  end
  -- The state a run parks with is a round's continuation, not a checkpoint.
  redis.call('HDEL', KEYS[1], 'resumable')
  if ARGV[5] == '' then
    redis.call('HDEL', KEYS[1], 'state')
  else
    redis.call('HSET', KEYS[1], 'state', ARGV[5])
  end
else
  -- The run's last progress note describes a step, not the ending: blanked (read as none;
  -- in this HSET, so finishing costs no command more). A completed task that reported
  -- progress is at 1; a failed one keeps how far it got.
  local progress = f[7]
  if status == 'completed' and progress then
    progress = '1000000'
  end
  if progress then
    redis.call('HSET', KEYS[1], 'status', status, ARGV[5], ARGV[6], 'updated', now, 'lease_until', 0,
      'iserr', ARGV[7], 'msg', '', 'progress', progress)
  else
    redis.call('HSET', KEYS[1], 'status', status, ARGV[5], ARGV[6], 'updated', now, 'lease_until', 0,
      'iserr', ARGV[7], 'msg', '')
  end
end
redis.call('PUBLISH', ARGV[3], status)
ack()
return 'done'
