-- renew.lua: extend a lease and record the tool's latest status note (message and, when
-- given, fraction done; a note without one keeps the last fraction); tell the holder to stop
-- when the task was cancelled, is gone, or is held under a newer lease. A held job's queue
-- entry is claimed afresh (idle time reset), so reclaim scans skip it while its lease lives;
-- a task run where it was created has its entry in the lease index moved to the new deadline
-- instead (only while it is there: once a sweep enqueued the task, the queue takes over).
--
-- KEYS[1]  task record (hash)    KEYS[2]  job stream    KEYS[3]  lease index (zset)
-- ARGV[1]  fencing token    ARGV[2]  lease ms    ARGV[3]  "1" if a message follows
-- ARGV[4]  status message   ARGV[5]  job entry id ('' = run where created)
-- ARGV[6]  worker name
-- ARGV[7]  fraction done in millionths, or '' when the note has none
-- returns  'held' | 'cancelled' | 'gone' | 'lost'
-- uses (from prelude.lua): now_ms, drop_if_expired

local now = now_ms()

local f = redis.call('HMGET', KEYS[1], 'status', 'token', 'msg', 'created', 'ttl', 'progress', 'id')
if not f[1] then
  return 'gone'
end
if drop_if_expired(KEYS[1], f[4], f[5], now) then
  return 'gone'
end
if f[1] == 'cancelled' then
  return 'cancelled'
end
if f[2] ~= ARGV[1] or f[1] == 'completed' or f[1] == 'failed' then
  return 'lost'
end
local deadline = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease_until', deadline)
if ARGV[5] ~= '' then
  redis.call('XCLAIM', KEYS[2], 'workers', ARGV[6], 0, ARGV[5], 'JUSTID')
else
  redis.call('ZADD', KEYS[3], 'XX', deadline, f[7])
end
if ARGV[3] == '1' and (f[3] ~= ARGV[4] or (ARGV[7] ~= '' and f[6] ~= ARGV[7])) then
  if ARGV[7] ~= '' then
    redis.call('HSET', KEYS[1], 'msg', ARGV[4], 'updated', now, 'progress', ARGV[7])
  else
    redis.call('HSET', KEYS[1], 'msg', ARGV[4], 'updated', now)
  end
end
return 'held'
